/*
 * hangfs.c - mount a file system that never answers, for tests of what
 * must not hang on a user's hung NFS or FUSE mount. It opens /dev/fuse,
 * mounts it at DIR (allow_other, so every user's access reaches it) and
 * then never reads a request: every access below DIR blocks (killably)
 * until this program ends, which aborts the connection.
 *
 * Usage (as root): hangfs DIR   (stays in the foreground; kill it, then
 * umount -l DIR)
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char opts[128];
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: hangfs DIR\n");
		return 2;
	}
	fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		perror("hangfs: /dev/fuse");
		return 1;
	}
	snprintf(opts, sizeof(opts),
		 "fd=%d,rootmode=40755,user_id=0,group_id=0,allow_other", fd);
	if (mount("hangfs", argv[1], "fuse.hangfs", MS_NOSUID | MS_NODEV,
		  opts) < 0) {
		perror("hangfs: mount");
		return 1;
	}
	printf("hangfs: %s mounted; nothing below it will answer\n", argv[1]);
	fflush(stdout);
	for (;;)
		pause();
}
