/* SPDX-License-Identifier: MIT */
#ifndef ASYNCPOOL_VERSION_H
#define ASYNCPOOL_VERSION_H

#define ASYNCPOOL_VERSION_MAJOR 1
#define ASYNCPOOL_VERSION_MINOR 0
#define ASYNCPOOL_VERSION_PATCH 0

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the library at run time, as "MAJOR.MINOR.PATCH". */
const char *asyncpool_version(void);

#ifdef __cplusplus
}
#endif

#endif /* ASYNCPOOL_VERSION_H */
