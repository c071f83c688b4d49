/* roles.h - tokterm roles: the roles --role and /role know. */
#ifndef TT_CMD_ROLES_H
#define TT_CMD_ROLES_H

/* Print each role's name, where it comes from and the first line of its prompt (a JSON array
 * with --json among argv). cfgpath: the config file read, may be NULL. Returns the exit
 * status. */
int cmd_roles(const char *cfgpath, int json, int argc, char **argv);

#endif
