/* Sizes as operators type them (virsh's units) and as tables show them. Pure: no I/O. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* What a SIZE argument means: an absolute size, or one relative to the current value. */
typedef struct {
    uint64_t max_bytes;     /* the domain's maximum: `N%` is relative to it; upper bound */
    uint64_t current_bytes; /* the balloon's current size: `+SIZE`/`-SIZE` move from it */
} BmSizeContext;

/* Parses a memory size the way virsh does: a bare number is KiB; suffixes b/byte(s),
 * k/K/KiB, M/MiB, G/GiB, T/TiB, P/PiB, E/EiB are 1024-based, KB/MB/GB/TB/PB/EB 1000-based
 * (case-insensitive); `N%` is N percent of ctx->max_bytes; a leading `+` or `-` makes the
 * size relative to ctx->current_bytes. A decimal fraction is accepted ("1.5G").
 * ctx may be NULL: then % and relative sizes are refused and no range is checked.
 * The result must be greater than 0 and at most ctx->max_bytes; with ctx, at least 1 KiB
 * (libvirt's unit for balloon targets).
 * Returns 0 and *ret_bytes, or -EINVAL/-ERANGE with the reason in bm_error_detail(). */
int bm_size_parse(const char *s, const BmSizeContext *ctx, uint64_t *ret_bytes);

/* Parses an unsigned size with the same units but no range, percent or sign: for limits in
 * policies and options. default_scale is the multiplier of a bare number (1024 for virsh's
 * KiB, 1 for bytes). Returns 0 or -EINVAL/-ERANGE with the reason in bm_error_detail(). */
int bm_size_parse_plain(const char *s, uint64_t default_scale, uint64_t *ret_bytes);

/* Formats bytes for a person: "0 B", "512 KiB", "1.5 GiB", "3 GiB" (1024-based, one decimal
 * unless whole). Writes at most n bytes to buf; returns buf. */
const char *bm_size_format(uint64_t bytes, char *buf, size_t n);

/* A size in a message, exact: bm_size_format() when that is the exact value ("4 GiB"), else
 * with the exact KiB (or bytes, below 1 KiB) after it: "3.9 GiB (4194303 KiB)". Writes at
 * most n bytes to buf (BM_SIZE_EXACT_LEN is enough); returns buf. */
#define BM_SIZE_EXACT_LEN 64
const char *bm_size_format_exact(uint64_t bytes, char *buf, size_t n);

/* bm_size_format() into buf (BM_SIZE_TEXT_LEN bytes, the caller's), "?" for BM_ABSENT. */
#define BM_SIZE_TEXT_LEN 32
const char *bm_size_text(uint64_t bytes, char *buf);

/* bm_size_text() into a buffer of the calling block (a compound literal): each BM_SZ() of one
 * printf has its own, however many there are. */
#define BM_SZ(bytes) bm_size_text((bytes), (char[BM_SIZE_TEXT_LEN]){""})
