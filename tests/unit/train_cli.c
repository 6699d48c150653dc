/* train_cli.c - see train_cli.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "train_cli.h"

char train_cli_dir[64];
char train_cli_prog[PATH_MAX];

int train_cli_setup(const char *tmpl)
{
	const char *b = getenv("top_builddir");
	char text[PATH_MAX + 16];
	FILE *f;

	snprintf(train_cli_prog, sizeof(train_cli_prog),
		 "%s/trainer/sigma-train", b ? b : "..");
	if (sigma_strlcpy(train_cli_dir, tmpl, sizeof(train_cli_dir)) >=
	    sizeof(train_cli_dir))
		return -1;
	if (!mkdtemp(train_cli_dir))
		return -1;
	/* a text with structure to learn */
	snprintf(text, sizeof(text), "%s/text.txt", train_cli_dir);
	f = fopen(text, "w");
	if (!f)
		return -1;
	for (int i = 0; i < 3000; i++)
		fprintf(f, "%d little pigs went to market, %s\n", i % 10,
			i % 3 ? "wee wee" : "all the way home");
	return fclose(f) == 0 ? 0 : -1;
}

int train_cli_setup_tokens(const char *tmpl)
{
	if (train_cli_setup(tmpl))
		return -1;
	return train_cli_run("'%s' prepare --train-out train.tok --val-out val.tok text.txt",
			     train_cli_prog) == 0
		       ? 0
		       : -1;
}

int train_cli_group_teardown(void **state)
{
	(void)state;
	return train_cli_teardown();
}

int train_cli_teardown(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", train_cli_dir);
	return system(cmd) == 0 ? 0 : -1;
}

int train_cli_run(const char *fmt, ...)
{
	char cmd[8192], full[8400];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	snprintf(full, sizeof(full), "cd '%s' && { %s; } >out 2>&1",
		 train_cli_dir, cmd);
	st = system(full);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

char *train_cli_slurp(const char *name)
{
	char p[PATH_MAX], *buf = NULL;
	size_t len;

	snprintf(p, sizeof(p), "%s/%s", train_cli_dir, name);
	assert_int_equal(sigma_file_read(p, 1 << 24, &buf, &len), 0);
	return buf;
}

bool train_cli_out_has(const char *what)
{
	char *buf = train_cli_slurp("out");
	bool hit = strstr(buf, what) != NULL;

	if (!hit)
		print_message("output lacks \"%s\":\n%s\n", what, buf);
	free(buf);
	return hit;
}
