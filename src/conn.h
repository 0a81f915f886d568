/* The libvirt connection: opening it, and the one place libvirt errors become -errno plus a
 * message (bm_error_detail()). */
#pragma once

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <stdbool.h>

#include "util.h"

/* libvirt API calls made by this process (those that may cross to the daemon); for the
 * benchmarks. BM_LV(call) counts one and evaluates call. */
extern unsigned long bm_libvirt_calls;
#define BM_LV(call) (__atomic_add_fetch(&bm_libvirt_calls, 1, __ATOMIC_RELAXED), (call))

DEFINE_CLEANUP(virConnectPtr, virConnectClose)
DEFINE_CLEANUP(virDomainPtr, virDomainFree)

/* Silences libvirt's default stderr printer and initialises the library. Call once. */
int bm_conn_init(void);

/* Registers libvirt's default event loop (virEventRegisterDefaultImpl()), once: a connection
 * opened after it gets domain events when the caller runs the loop (bm_conn_run_events()).
 * Returns 0 or -errno. */
int bm_conn_event_loop_init(void);

/* Runs one iteration of libvirt's default event loop: waits for a timer or handle and
 * dispatches it. Returns 0 or -errno. */
int bm_conn_run_events(void);

/* The URI to use: uri if given, else $BALLOONMGR_URI, else NULL (libvirt's default). */
const char *bm_conn_default_uri(const char *uri);

/* libvirt's QEMU state directory of conn, where the QEMU driver keeps NAME.pid of each running
 * domain, into buf (n bytes): /run/libvirt/qemu for qemu:///system,
 * $XDG_RUNTIME_DIR/libvirt/qemu/run for qemu:///session. Returns buf, or NULL for another
 * driver or a remote host (its processes are not this host's). */
const char *bm_conn_qemu_run_dir(virConnectPtr conn, char *buf, size_t n);

/* Opens a connection (read-only when readonly). Returns 0 and *ret_conn (caller closes),
 * or -errno with the reason. */
int bm_conn_open(const char *uri, bool readonly, virConnectPtr *ret_conn);

/* Maps libvirt's last error in this thread to -errno and records its message, prefixed by
 * what (may be NULL). -ENOENT: no such domain; -ESRCH: invalid in the domain's state (e.g. not
 * running); -EINVAL: invalid argument or configuration;
 * -ENOTSUP: not supported by the driver; -EACCES: denied; -ETIMEDOUT: timeout/busy;
 * -ECONNRESET: connection lost; -EIO: anything else. */
int bm_conn_error(const char *what);

/* The URI libvirt says conn is connected to (the default resolved: "qemu:///system"); "" when
 * it cannot say. Caller frees. */
char *bm_conn_uri(virConnectPtr conn);

/* Whether conn's URI names no host ("qemu:///system", "qemu+unix:///system"): the domains'
 * binaries are on this machine. */
bool bm_conn_is_local(virConnectPtr conn);

/* Looks a domain up as virsh does: by ID when name is a number (running domains have one),
 * then by UUID when it is one, then by name. Returns 0 and *ret_dom (caller frees), -ENOENT
 * ("no domain with this name, ID or UUID") if none matches, or another -errno. */
int bm_conn_lookup(virConnectPtr conn, const char *name, virDomainPtr *ret_dom);

/* Looks a domain up by its name only (a name libvirt listed, which may look like an ID).
 * Returns 0 and *ret_dom (caller frees), -ENOENT if there is none. */
int bm_conn_lookup_name(virConnectPtr conn, const char *name, virDomainPtr *ret_dom);

/* Names of the domains (active ones, or all with all), sorted, NULL-terminated. Returns the
 * count and *ret_names (free with bm_strv_free()), or -errno. */
int bm_conn_list_names(virConnectPtr conn, bool all, char ***ret_names);

typedef enum { BM_KEY_NAME, BM_KEY_ID, BM_KEY_UUID } BmDomainKey;

/* What identifies each domain (active ones, or all with all) as key says, in the order of
 * their names, NULL-terminated: names, IDs (running domains only: others have none) or
 * UUIDs. Returns the count and *ret_keys (free with bm_strv_free()), or -errno. */
int bm_conn_list_keys(virConnectPtr conn, bool all, BmDomainKey key, char ***ret_keys);

void bm_strv_free(char **v);
DEFINE_CLEANUP(char **, bm_strv_free)

/* The domain's XML: persistent (inactive) definition when inactive, else the live one. Returns
 * 0 and *ret_xml (caller frees) or -errno. */
int bm_conn_domain_xml(virDomainPtr dom, bool inactive, char **ret_xml);

/* Replaces the persistent definition with xml, validated against libvirt's schema. libvirt
 * either takes all of it or nothing. Returns 0 or -errno with libvirt's reason. */
int bm_conn_define(virConnectPtr conn, const char *xml);

/* Whether the domain is running / has a persistent definition. Returns 0 or -errno. */
int bm_conn_domain_state(virDomainPtr dom, bool *ret_active, bool *ret_persistent);
