/* mistake: an off-by-one halo: the packed column is unpacked into the column before the last one
   feedback: element \(0, 510\), outside the received column, changed */
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
    for (int i = 0; i < rows; i++) buf[i] = a[(long)i * cols + col];
}

void unpack_column(double *a, int rows, int cols, int col, const double *buf)
{
    for (int i = 0; i < rows; i++) a[(long)i * cols + col - 1] = buf[i];
}
