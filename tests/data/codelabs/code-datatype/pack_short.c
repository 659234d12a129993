/* mistake: an off-by-one count: the last row is neither packed nor unpacked
   feedback: manual packing, .*element \(299, 511\) of the received column .*nothing arrived there */
#include <mpi.h>

MPI_Datatype make_column(int rows, int cols)
{
    MPI_Datatype column;
    MPI_Type_vector(rows, 1, cols, MPI_DOUBLE, &column);
    MPI_Type_commit(&column);
    return column;
}

void pack_column(const double *a, int rows, int cols, int col, double *buf)
{
    for (int i = 0; i < rows - 1; i++) buf[i] = a[(long)i * cols + col];
}

void unpack_column(double *a, int rows, int cols, int col, const double *buf)
{
    for (int i = 0; i < rows - 1; i++) a[(long)i * cols + col] = buf[i];
}
