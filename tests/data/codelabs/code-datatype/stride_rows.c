/* mistake: a wrong stride: the column's elements taken rows apart instead of cols apart
   feedback: element \(1, 511\) of the received column .*the stride */
#include <mpi.h>

MPI_Datatype make_column(int rows, int cols)
{
    MPI_Datatype column;
    (void)cols;
    MPI_Type_vector(rows, 1, rows, MPI_DOUBLE, &column);
    MPI_Type_commit(&column);
    return column;
}

void pack_column(const double *a, int rows, int cols, int col, double *buf)
{
    for (int i = 0; i < rows; i++) buf[i] = a[(long)i * cols + col];
}

void unpack_column(double *a, int rows, int cols, int col, const double *buf)
{
    for (int i = 0; i < rows; i++) a[(long)i * cols + col] = buf[i];
}
