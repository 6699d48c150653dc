/*
 * tools.h - sigma-train's helper commands, "prepare" and "sgemm"
 * (sigma-train(1)). Each takes its own argv (argv[0] the command's name)
 * and returns an exit code.
 */
#ifndef SIGMA_TRAIN_TOOLS_H
#define SIGMA_TRAIN_TOOLS_H

int tool_prepare(int argc, char **argv);
int tool_sgemm(int argc, char **argv);

#endif /* SIGMA_TRAIN_TOOLS_H */
