/* Peak RSS of one command, its own (issue 21).
 *
 * Usage: rss_exec FD CMD [ARG...]: runs CMD, waits for it, writes "<peak RSS in KiB>\n" (the
 * ru_maxrss of wait4, which for a command with children is the largest of it and its waited-for
 * descendants) to file descriptor FD, and exits with CMD's exit status (128 + signal number if
 * a signal ended it; 127 if it could not be started).
 *
 * Why a launcher: Linux keeps a process's peak RSS across exec, and a child made by fork or vfork
 * starts with its parent's pages mapped, so a command started straight from the benchmark driver
 * reports the driver's high-water mark (every contender of a Python driver that had 1.3 GB
 * showed 1.3 GB). This program is a few hundred KiB: the command it forks starts from that. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s FD CMD [ARG...]\n", argv[0]); return 2; }
    int fd = atoi(argv[1]);
    pid_t pid = fork();
    if (pid < 0) { perror("rss_exec: fork"); return 127; }
    if (pid == 0) {
        close(fd);
        execvp(argv[2], argv + 2);
        fprintf(stderr, "rss_exec: %s: %s\n", argv[2], strerror(errno));
        _exit(127);
    }
    int status;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) { perror("rss_exec: wait4"); return 127; }
    }
    dprintf(fd, "%ld\n", ru.ru_maxrss);
    close(fd);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}
