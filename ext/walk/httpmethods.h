/* The request methods the dissector recognises, index = MethodId (ext/walk/message.pxd); mirrors
 * webtap.schema.METHOD_NAMES (tests/dissect/test_schema_sizes.py checks). Every method of IANA's
 * HTTP Method Registry (RFC 9110 section 9, PATCH (RFC 5789), WebDAV (RFC 4918, 3253, 3648,
 * 4791, 5323, 5842), LINK/UNLINK (RFC 2068), PRI (RFC 9113), QUERY (the HTTP WG's QUERY method
 * draft)) and the few non-standard ones common in real traffic. New methods are appended, so
 * MethodIds stay stable. Static data: each module that includes it has its own copy. */
#ifndef WT_HTTPMETHODS_H
#define WT_HTTPMETHODS_H
#include <stdint.h>

typedef struct { const char *name; uint32_t len; } wt_method_t;
#define WT_M(s) { s, sizeof(s) - 1 }
static const wt_method_t wt_methods[] = {
    { 0, 0 },
    WT_M("GET"), WT_M("HEAD"), WT_M("POST"), WT_M("PUT"), WT_M("DELETE"), WT_M("CONNECT"),
    WT_M("OPTIONS"), WT_M("TRACE"), WT_M("PATCH"),
    WT_M("PROPFIND"), WT_M("PROPPATCH"), WT_M("MKCOL"), WT_M("COPY"), WT_M("MOVE"), WT_M("LOCK"),
    WT_M("UNLOCK"), WT_M("SEARCH"), WT_M("VERSION-CONTROL"), WT_M("REPORT"), WT_M("CHECKOUT"),
    WT_M("CHECKIN"), WT_M("UNCHECKOUT"), WT_M("MKWORKSPACE"), WT_M("UPDATE"), WT_M("LABEL"),
    WT_M("MERGE"), WT_M("BASELINE-CONTROL"), WT_M("MKACTIVITY"), WT_M("ORDERPATCH"), WT_M("ACL"),
    WT_M("MKCALENDAR"), WT_M("BIND"), WT_M("UNBIND"), WT_M("REBIND"), WT_M("MKREDIRECTREF"),
    WT_M("UPDATEREDIRECTREF"), WT_M("NOTIFY"), WT_M("SUBSCRIBE"), WT_M("UNSUBSCRIBE"), WT_M("POLL"),
    WT_M("BCOPY"), WT_M("BMOVE"), WT_M("BDELETE"), WT_M("BPROPFIND"), WT_M("BPROPPATCH"),
    WT_M("CCM_POST"), WT_M("RPC_CONNECT"), WT_M("RPC_IN_DATA"), WT_M("RPC_OUT_DATA"),
    WT_M("SSTP_DUPLEX_POST"),
    WT_M("QUERY"), WT_M("LINK"), WT_M("UNLINK"), WT_M("PRI"),
};
#undef WT_M
#define WT_N_METHODS ((int)(sizeof(wt_methods) / sizeof(wt_methods[0])))
#define WT_MAX_METHOD_LEN 17       /* longest: UPDATEREDIRECTREF */

/* Every method token is made of these bytes: A-Z, '-', '_'. */
static inline int wt_method_char(uint8_t c) {
    return (c >= 'A' && c <= 'Z') || c == '-' || c == '_';
}
#endif
