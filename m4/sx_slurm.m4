# SX_SLURM: Slurm headers and libslurm (plugin, probe --drain, controller).
#   --with-slurm[=DIR]          default: look in the standard paths and report
#   --with-slurm-plugindir=DIR  where sigma.so is installed (default: Slurm's)
# DIR is an installation prefix (DIR/include, DIR/lib64 or DIR/lib) or an
# unpacked Debian package tree (DIR/usr/include, DIR/usr/lib/<multiarch>,
# as contrib/slurm-headers makes). Its headers are included with -isystem:
# Slurm's own declarations are not held to sigma's warnings, as they are
# not when they sit in /usr/include.
# Sets have_slurm, SLURM_CPPFLAGS, SLURM_LDFLAGS, SLURM_LIBS, SLURM_PLUGINDIR,
# SLURM_VERSION_STR (22.05.8), AM_CONDITIONAL HAVE_SLURM.
AC_DEFUN([SX_SLURM], [
	AC_ARG_WITH([slurm],
		AS_HELP_STRING([--with-slurm@<:@=DIR@:>@], [Slurm prefix (headers and libslurm)]),
		[], [with_slurm=check])
	AC_ARG_WITH([slurm-plugindir],
		AS_HELP_STRING([--with-slurm-plugindir=DIR], [install sigma.so here (default: Slurm's PluginDir)]),
		[SLURM_PLUGINDIR=$withval], [SLURM_PLUGINDIR=""])
	have_slurm=no
	SLURM_CPPFLAGS=""
	SLURM_LDFLAGS=""
	SLURM_LIBS=""
	SLURM_VERSION_STR=""
	sx_lib=""
	AS_IF([test "x$with_slurm" != xno], [
		AS_CASE([$with_slurm], [yes|check], [], [
			sx_multiarch=$($CC -print-multiarch 2>/dev/null)
			sx_inc=""
			for sx_d in "$with_slurm/include" "$with_slurm/usr/include"; do
				AS_IF([test -f "$sx_d/slurm/slurm.h"], [sx_inc=$sx_d; break])
			done
			for sx_d in "$with_slurm/lib64" "$with_slurm/lib" \
				${sx_multiarch:+"$with_slurm/usr/lib/$sx_multiarch"} \
				"$with_slurm/usr/lib64" "$with_slurm/usr/lib"; do
				AS_IF([test -e "$sx_d/libslurm.so"], [sx_lib=$sx_d; break])
			done
			AS_IF([test -z "$sx_inc"], [sx_inc=$with_slurm/include])
			AS_IF([test -z "$sx_lib"], [sx_lib=$with_slurm/lib])
			AS_IF([test "x$sx_inc" != x/usr/include], [SLURM_CPPFLAGS="-isystem $sx_inc"])
			SLURM_LDFLAGS="-L$sx_lib"
		])
		sx_save_CPPFLAGS=$CPPFLAGS; sx_save_LDFLAGS=$LDFLAGS; sx_save_LIBS=$LIBS
		CPPFLAGS="$CPPFLAGS $SLURM_CPPFLAGS"
		LDFLAGS="$LDFLAGS $SLURM_LDFLAGS"
		AC_CHECK_HEADERS([slurm/spank.h slurm/slurm.h], [have_slurm=yes], [have_slurm=no; break])
		AS_IF([test "x$have_slurm" = xyes], [
			AC_CHECK_LIB([slurm], [slurm_init], [SLURM_LIBS=-lslurm], [have_slurm=no])
		])
		AS_IF([test "x$have_slurm" = xyes], [
			AC_MSG_CHECKING([Slurm version])
			AC_COMPUTE_INT([sx_slurm_ver], [SLURM_VERSION_NUMBER], [#include <slurm/slurm_version.h>], [sx_slurm_ver=0])
			SLURM_VERSION_STR=$(printf "%d.%02d.%d" $(( sx_slurm_ver >> 16 )) $(( (sx_slurm_ver >> 8) & 255 )) $(( sx_slurm_ver & 255 )))
			AC_MSG_RESULT([$SLURM_VERSION_STR])
			dnl the releases the adapters are built against (docs/building.md)
			AS_IF([test "$sx_slurm_ver" -lt $(( (22 << 16) + (5 << 8) )) ||
			       test "$sx_slurm_ver" -ge $(( (26 << 16) + (6 << 8) ))],
				[AC_MSG_WARN([Slurm $SLURM_VERSION_STR: sigma is built against 22.05 to 26.05; its libslurm calls may not compile])])
		])
		CPPFLAGS=$sx_save_CPPFLAGS; LDFLAGS=$sx_save_LDFLAGS; LIBS=$sx_save_LIBS
		AS_IF([test "x$have_slurm" = xno && test "x$with_slurm" != xcheck],
			[AC_MSG_ERROR([--with-slurm was given but slurm/spank.h, slurm/slurm.h or libslurm were not found (Debian: apt-get install libslurm-dev)])])
	])
	AS_IF([test "x$have_slurm" = xyes && test -z "$SLURM_PLUGINDIR"], [
		AC_MSG_CHECKING([Slurm plugin directory])
		for sx_d in ${sx_lib:+"$sx_lib/slurm"} "$with_slurm/lib/slurm" /usr/lib/x86_64-linux-gnu/slurm-wlm /usr/lib64/slurm /usr/lib/slurm /usr/local/lib/slurm; do
			AS_IF([test -f "$sx_d/select_cons_tres.so"], [SLURM_PLUGINDIR=$sx_d; break])
		done
		AS_IF([test -z "$SLURM_PLUGINDIR"], [SLURM_PLUGINDIR='${libdir}/slurm'])
		AC_MSG_RESULT([$SLURM_PLUGINDIR])
	])
	AS_IF([test -z "$SLURM_PLUGINDIR"], [SLURM_PLUGINDIR='${libdir}/slurm'])
	AS_IF([test "x$have_slurm" = xyes], [AC_DEFINE([HAVE_SLURM], [1], [Slurm headers and libslurm])])
	AC_SUBST([SLURM_CPPFLAGS])
	AC_SUBST([SLURM_LDFLAGS])
	AC_SUBST([SLURM_LIBS])
	AC_SUBST([SLURM_PLUGINDIR])
	AM_CONDITIONAL([HAVE_SLURM], [test "x$have_slurm" = xyes])
])
