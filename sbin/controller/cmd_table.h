/*
 * cmd_table.h - the commands of sigmad's socket, in the one table both
 * ends read: sigmactl checks a command line against it and prints its
 * usage from it; sigmad's server matches a request against it, refuses a
 * command for admins to anyone else, and calls the handler it names.
 *
 * A request is one line of tab-separated words: the command's name, its
 * fixed second word if it has one ("spares add"), its NODE words, then its
 * tail: drain's reason (--reason on the command line) or history's
 * key=value filters (from --job, --node and --since).
 */
#ifndef SIGMAD_CMD_TABLE_H
#define SIGMAD_CMD_TABLE_H

#include <stdbool.h>
#include <stdio.h>

enum cmd_tail {
	CMD_TAIL_NONE = 0,
	CMD_TAIL_REASON,  /* one more word: --reason TEXT */
	CMD_TAIL_FILTERS, /* any number of key=value words */
};

/*
 * One row a command:
 *   X(id, name, sub, nodes, tail, admin, handler, synopsis, help)
 * sub: a fixed second word, or NULL; nodes: how many NODE words follow;
 * admin: for root and SlurmUser only; handler: the server's function for
 * it (server.c); synopsis and help: its line in sigmactl's usage, NULL
 * where the row above says it.
 */
#define CMD_TABLE(X)                                                           \
	X(CMD_STATUS, "status", NULL, 0, CMD_TAIL_NONE, false, srv_cmd_status, \
	  "status", "spares, managed jobs, nodes in repair")                   \
	X(CMD_SPARES, "spares", NULL, 0, CMD_TAIL_NONE, false, srv_cmd_spares, \
	  "spares [add|remove NODE]", "the hot-spare pool")                    \
	X(CMD_SPARE_ADD, "spares", "add", 1, CMD_TAIL_NONE, true,              \
	  srv_cmd_spare_add, NULL, NULL)                                       \
	X(CMD_SPARE_REMOVE, "spares", "remove", 1, CMD_TAIL_NONE, true,        \
	  srv_cmd_spare_remove, NULL, NULL)                                    \
	X(CMD_HISTORY, "history", NULL, 0, CMD_TAIL_FILTERS, false,            \
	  srv_cmd_history,                                                     \
	  "history [--job ID] [--node NAME] [--since TIME] [--json]", "")      \
	X(CMD_DRAIN, "drain", NULL, 1, CMD_TAIL_REASON, true, srv_cmd_drain,   \
	  "drain NODE --reason TEXT", "take a node out (root, SlurmUser)")     \
	X(CMD_RESUME, "resume", NULL, 1, CMD_TAIL_NONE, true, srv_cmd_resume,  \
	  "resume NODE", "put it back (root, SlurmUser)")                      \
	X(CMD_SUSPECT, "suspect", NULL, 1, CMD_TAIL_FILTERS, false,            \
	  srv_cmd_suspect, "suspect NODE --job ID",                            \
	  "drain a node of your in-job restart job where its rank keeps dying")  \
	X(CMD_SLOW, "slow", NULL, 1, CMD_TAIL_FILTERS, false, srv_cmd_slow,   \
	  "slow NODE --job ID",                                                \
	  "warn of a node of your job where its rank stays slow (the tuner)")  \
	X(CMD_RELAUNCH, "relaunch", NULL, 0, CMD_TAIL_FILTERS, false,          \
	  srv_cmd_relaunch, "relaunch --job ID --launch N [--off NODE,...]",  \
	  "count a relaunch of your in-job restart job (once a launch) "       \
	  "against its restarts; --off: the nodes it moved off")

enum cmd_id {
#define CMD_ID(id, ...) id,
	CMD_TABLE(CMD_ID)
#undef CMD_ID
	CMD_COUNT
};

/* a row of CMD_TABLE, less its handler */
struct cmd_spec {
	enum cmd_id id;
	const char *name;
	const char *sub;
	int nodes;
	enum cmd_tail tail;
	bool admin;
	const char *synopsis, *help;
};

/* The request's words w[0..n), n >= 1: the command they are, or NULL. */
const struct cmd_spec *cmd_match_request(char *const *w, int n);
/* A command line: its name and its npos words that are no option. */
const struct cmd_spec *cmd_match_line(const char *name, char *const *pos,
				      int npos);
/* Some command called name is for root and SlurmUser only. */
bool cmd_admin_only(const char *name);
/* The commands' lines of sigmactl's usage. */
void cmd_usage(FILE *f);

#endif /* SIGMAD_CMD_TABLE_H */
