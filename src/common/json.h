/* A small JSON writer: the kernels build their machine-readable report with it.
   Values are appended to a growing buffer; commas are managed per nesting level. Pass key = NULL
   for values inside arrays. Non-finite doubles become null (JSON has no NaN). */
#ifndef HPCLAB_JSON_H
#define HPCLAB_JSON_H
#include <stddef.h>

typedef struct {
    char *buf;
    size_t len, cap;
    int depth;
    int count[64]; /* values written so far at each depth */
} hpc_json;

void js_init(hpc_json *j);
void js_free(hpc_json *j);
void js_obj_open(hpc_json *j, const char *key);
void js_obj_close(hpc_json *j);
void js_arr_open(hpc_json *j, const char *key);
void js_arr_close(hpc_json *j);
void js_str(hpc_json *j, const char *key, const char *val); /* val NULL -> null */
void js_int(hpc_json *j, const char *key, long long val);
void js_num(hpc_json *j, const char *key, double val);
void js_bool(hpc_json *j, const char *key, int val);
void js_null(hpc_json *j, const char *key);
void js_raw(hpc_json *j, const char *key, const char *json); /* already-encoded JSON value */

/* Write buf to path atomically (temp file in the same folder, then link into place); fails
   rather than replacing an existing file. 0 on success, -1 on failure (errno says why). */
int js_write_file(const hpc_json *j, const char *path);

#endif
