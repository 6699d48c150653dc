# SX_HDF5: the HDF5 C library (trainer checkpoints).
#   --with-hdf5[=DIR]   default: pkg-config hdf5 (serial), report if absent
AC_DEFUN([SX_HDF5], [
	AC_ARG_WITH([hdf5],
		AS_HELP_STRING([--with-hdf5@<:@=DIR@:>@], [HDF5 prefix (checkpoints)]),
		[], [with_hdf5=check])
	have_hdf5=no
	HDF5_CFLAGS=""
	HDF5_LIBS=""
	HDF5_VERSION_STR=""
	AS_CASE([$with_hdf5],
	[no], [],
	[yes|check], [
		PKG_CHECK_MODULES([HDF5], [hdf5], [have_hdf5=yes; HDF5_VERSION_STR=$($PKG_CONFIG --modversion hdf5)], [have_hdf5=no])
	], [
		HDF5_CFLAGS="-I$with_hdf5/include"
		HDF5_LIBS="-L$with_hdf5/lib -lhdf5"
		have_hdf5=yes
	])
	AS_IF([test "x$have_hdf5" = xyes], [
		sx_save_CPPFLAGS=$CPPFLAGS; sx_save_LIBS=$LIBS
		CPPFLAGS="$CPPFLAGS $HDF5_CFLAGS"; LIBS="$HDF5_LIBS $LIBS"
		AC_CHECK_HEADER([hdf5.h], [], [have_hdf5=no])
		AS_IF([test "x$have_hdf5" = xyes], [AC_CHECK_FUNC([H5Fcreate], [], [have_hdf5=no])])
		CPPFLAGS=$sx_save_CPPFLAGS; LIBS=$sx_save_LIBS
	])
	AS_IF([test "x$have_hdf5" = xno && test "x$with_hdf5" != xcheck && test "x$with_hdf5" != xno],
		[AC_MSG_ERROR([--with-hdf5 was given but hdf5.h or libhdf5 was not found (Debian: apt-get install libhdf5-dev)])])
	AS_IF([test "x$have_hdf5" = xyes], [AC_DEFINE([HAVE_HDF5], [1], [HDF5 library])])
	AC_SUBST([HDF5_CFLAGS])
	AC_SUBST([HDF5_LIBS])
	AM_CONDITIONAL([HAVE_HDF5], [test "x$have_hdf5" = xyes])
])
