/*
 * cmd_table.c - the commands of sigmad's socket as data, and how a request
 * or a command line is matched against them (see cmd_table.h). Shared by
 * sigmactl and sigmad; no handler is called here.
 */
#include <string.h>

#include "cmd_table.h"

static const struct cmd_spec cmd_specs[] = {
#define CMD_SPEC(id, name, sub, nodes, tail, admin, handler, synopsis, help)   \
	{id, name, sub, nodes, tail, admin, synopsis, help},
	CMD_TABLE(CMD_SPEC)
#undef CMD_SPEC
};

/*
 * args: the nargs words after the name. On the wire the tail is words
 * too; on a command line it comes from options, and args holds only the
 * words that are no option.
 */
static bool cmd_fits(const struct cmd_spec *s, const char *name,
		     char *const *args, int nargs, bool wire)
{
	int want = s->nodes;

	if (strcmp(s->name, name))
		return false;
	if (s->sub) {
		if (nargs < 1 || strcmp(args[0], s->sub))
			return false;
		nargs--;
	}
	if (wire && s->tail == CMD_TAIL_FILTERS)
		return nargs >= want;
	if (wire && s->tail == CMD_TAIL_REASON)
		want++;
	return nargs == want;
}

static const struct cmd_spec *cmd_match(const char *name, char *const *args,
					int nargs, bool wire)
{
	for (size_t i = 0; i < CMD_COUNT; i++)
		if (cmd_fits(&cmd_specs[i], name, args, nargs, wire))
			return &cmd_specs[i];
	return NULL;
}

const struct cmd_spec *cmd_match_request(char *const *w, int n)
{
	return cmd_match(w[0], w + 1, n - 1, true);
}

const struct cmd_spec *cmd_match_line(const char *name, char *const *pos,
				      int npos)
{
	return cmd_match(name, pos, npos, false);
}

bool cmd_admin_only(const char *name)
{
	for (size_t i = 0; i < CMD_COUNT; i++)
		if (cmd_specs[i].admin && !strcmp(cmd_specs[i].name, name))
			return true;
	return false;
}

void cmd_usage(FILE *f)
{
	for (size_t i = 0; i < CMD_COUNT; i++) {
		const struct cmd_spec *c = &cmd_specs[i];

		if (!c->synopsis)
			continue;
		/* a long synopsis has its help on the next line */
		if (strlen(c->synopsis) >= 32 && *c->help)
			fprintf(f, "  %s\n  %-32s%s\n", c->synopsis, "",
				c->help);
		else
			fprintf(f, "  %-32s%s\n", c->synopsis, c->help);
	}
}
