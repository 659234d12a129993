/* The JSON writer behind every kernel's --json report (see json.h). */
#include "json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void put(hpc_json *j, const char *s, size_t n)
{
    if (j->len + n + 1 > j->cap) {
        size_t cap = j->cap ? j->cap : 4096;
        while (j->len + n + 1 > cap) cap *= 2;
        char *b = realloc(j->buf, cap);
        if (!b) {
            fprintf(stderr, "ERROR: out of memory while writing the JSON report\n");
            exit(1);
        }
        j->buf = b;
        j->cap = cap;
    }
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = '\0';
}

static void puts_(hpc_json *j, const char *s) { put(j, s, strlen(s)); }

static void put_string(hpc_json *j, const char *s)
{
    puts_(j, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            put(j, esc, 2);
        } else if (*p < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            puts_(j, esc);
        } else {
            put(j, (const char *)p, 1);
        }
    }
    puts_(j, "\"");
}

/* Comma and key before a new value at the current depth. */
static void begin_value(hpc_json *j, const char *key)
{
    if (j->count[j->depth]++ > 0) puts_(j, ", ");
    if (key) {
        put_string(j, key);
        puts_(j, ": ");
    }
}

void js_init(hpc_json *j) { memset(j, 0, sizeof *j); }

void js_free(hpc_json *j)
{
    free(j->buf);
    memset(j, 0, sizeof *j);
}

void js_obj_open(hpc_json *j, const char *key)
{
    begin_value(j, key);
    puts_(j, "{");
    j->count[++j->depth] = 0;
}

void js_obj_close(hpc_json *j)
{
    j->depth--;
    puts_(j, "}");
}

void js_arr_open(hpc_json *j, const char *key)
{
    begin_value(j, key);
    puts_(j, "[");
    j->count[++j->depth] = 0;
}

void js_arr_close(hpc_json *j)
{
    j->depth--;
    puts_(j, "]");
}

void js_str(hpc_json *j, const char *key, const char *val)
{
    begin_value(j, key);
    if (val)
        put_string(j, val);
    else
        puts_(j, "null");
}

void js_int(hpc_json *j, const char *key, long long val)
{
    char b[32];
    snprintf(b, sizeof b, "%lld", val);
    begin_value(j, key);
    puts_(j, b);
}

void js_num(hpc_json *j, const char *key, double val)
{
    char b[40];
    begin_value(j, key);
    if (!isfinite(val)) {
        puts_(j, "null");
        return;
    }
    snprintf(b, sizeof b, "%.17g", val); /* round-trips a double exactly */
    puts_(j, b);
}

void js_bool(hpc_json *j, const char *key, int val)
{
    begin_value(j, key);
    puts_(j, val ? "true" : "false");
}

void js_null(hpc_json *j, const char *key)
{
    begin_value(j, key);
    puts_(j, "null");
}

void js_raw(hpc_json *j, const char *key, const char *json)
{
    begin_value(j, key);
    puts_(j, json);
}

int js_write_file(const hpc_json *j, const char *path)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) return -1;
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    int ok = fwrite(j->buf, 1, j->len, f) == j->len && fputc('\n', f) != EOF;
    ok = (fclose(f) == 0) && ok;
    /* link() instead of rename(): an existing report is never replaced. */
    int rc = (ok && link(tmp, path) == 0) ? 0 : -1;
    unlink(tmp);
    return rc;
}
