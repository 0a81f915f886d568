/* The running agent (docs/design.md, "The agent"): one thread running libvirt's event loop,
 * every job a timer or a handle on it (the connection and its back-off, passes, polling the
 * changes in flight, the host and guest watches, refreshes after events, the spool, saving the
 * state file, the SIGHUP reload, the service manager's notifications), and libmicrohttpd's
 * threads serving the last rendering on /metrics. The verb (cmd-agent.c) parses its options
 * and prints its help; everything after is here. */
#pragma once

#include <stdbool.h>

typedef struct {
    const char *uri;           /* the libvirt connection (-c), NULL: libvirt's default */
    bool monitor_only;         /* -r: read-only connection, no monitor, no spool, nothing written */
    const char *policy_path;
    bool policy_explicit;      /* given: it must exist (else the built-in defaults when missing) */
    const char *listen;        /* --listen ADDR:PORT */
    const char *web_config;    /* --web-config FILE, NULL: none */
    const char *state_path;
    bool state_explicit;       /* given: read also when monitoring only */
    const char *proc_dir;      /* host memory from there instead of /proc, NULL: /proc */
    bool dry_run;              /* decide and export, never change a balloon or the state file */
    bool no_libvirt_duplicates;
} BmAgentOptions;

/* Runs the agent with o (kept by the caller until it returns) until SIGTERM or SIGINT: loads
 * the policy and the web config, checks --state, --proc and --listen, locks the state file,
 * serves /metrics, then runs the loop; saves the state once more on the way out. Reports
 * what keeps it from starting, as the verb "agent", and returns the exit status: BM_EXIT_OK
 * after a stop, BM_EXIT_USAGE for a bad policy, web config, --state, --proc or --listen,
 * BM_EXIT_BUSY when another writer holds the state file, BM_EXIT_FAILURE when it cannot
 * serve. */
int bm_agent_run(const BmAgentOptions *o);
