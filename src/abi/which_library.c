/* which_library: each rank prints the MPI library it was handed at run time.
 *
 * Built once with an MPI 5.0 ABI wrapper (MPICH's mpicc_abi), the binary links libmpi_abi.so.1,
 * the standard ABI's library, and no implementation's own libmpi; whichever library provides
 * libmpi_abi.so.1 when it starts runs it. Notebook 02 builds it and runs it under every library
 * here that ships the ABI.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int rank, size, length, major, minor;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_version(&major, &minor);
    MPI_Get_library_version(version, &length);
    /* the first line of the version string is enough to name the library */
    version[strcspn(version, "\n")] = '\0';
    printf("rank %d of %d: MPI %d.%d, library: %s\n", rank, size, major, minor, version);
    MPI_Finalize();
    return 0;
}
