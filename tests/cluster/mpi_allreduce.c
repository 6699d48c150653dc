/*
 * mpi_allreduce.c - MPI_Allreduce of (rank + 1) over all ranks; prints
 * "rank R size S node N sum X expect Y".
 */
#include <stdio.h>
#include <stdlib.h>

#include <mpi.h>

int main(int argc, char **argv)
{
	const char *node = getenv("SLURMD_NODENAME");
	int rank, size, mine, sum = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	mine = rank + 1;
	MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	printf("rank %d size %d node %s sum %d expect %d\n", rank, size,
	       node ? node : "unknown", sum, size * (size + 1) / 2);
	MPI_Finalize();
	return sum == size * (size + 1) / 2 ? 0 : 1;
}
