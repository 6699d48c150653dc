# SX_MPI: an MPI library (CPU collectives of the trainer).
#   --with-mpi[=DIR]   default: pkg-config ompi-c (Open MPI), report if absent
AC_DEFUN([SX_MPI], [
	AC_ARG_WITH([mpi],
		AS_HELP_STRING([--with-mpi@<:@=DIR@:>@], [MPI prefix (trainer CPU collectives)]),
		[], [with_mpi=check])
	have_mpi=no
	MPI_CFLAGS=""
	MPI_LIBS=""
	MPI_VERSION_STR=""
	AS_CASE([$with_mpi],
	[no], [],
	[yes|check], [
		PKG_CHECK_MODULES([MPI], [ompi-c], [have_mpi=yes; MPI_VERSION_STR="Open MPI $($PKG_CONFIG --modversion ompi-c)"],
			[PKG_CHECK_MODULES([MPI], [mpich], [have_mpi=yes; MPI_VERSION_STR="MPICH $($PKG_CONFIG --modversion mpich)"], [have_mpi=no])])
	], [
		MPI_CFLAGS="-I$with_mpi/include"
		MPI_LIBS="-L$with_mpi/lib -lmpi"
		have_mpi=yes
	])
	AS_IF([test "x$have_mpi" = xyes], [
		sx_save_CPPFLAGS=$CPPFLAGS; sx_save_LIBS=$LIBS
		CPPFLAGS="$CPPFLAGS $MPI_CFLAGS"; LIBS="$MPI_LIBS $LIBS"
		AC_CHECK_HEADER([mpi.h], [], [have_mpi=no])
		AS_IF([test "x$have_mpi" = xyes], [AC_CHECK_FUNC([MPI_Init_thread], [], [have_mpi=no])])
		CPPFLAGS=$sx_save_CPPFLAGS; LIBS=$sx_save_LIBS
	])
	AS_IF([test "x$have_mpi" = xno && test "x$with_mpi" != xcheck && test "x$with_mpi" != xno],
		[AC_MSG_ERROR([--with-mpi was given but mpi.h or libmpi was not found (Debian: apt-get install libopenmpi-dev)])])
	AS_IF([test "x$have_mpi" = xyes], [AC_DEFINE([HAVE_MPI], [1], [MPI library])])
	AC_SUBST([MPI_CFLAGS])
	AC_SUBST([MPI_LIBS])
	AM_CONDITIONAL([HAVE_MPI], [test "x$have_mpi" = xyes])
])
