/* SPDX-License-Identifier: Apache-2.0 */
#ifndef DEVGATE_VERSION_H
#define DEVGATE_VERSION_H

#ifndef DEVGATE_VERSION
#define DEVGATE_VERSION "0.1.0"
#endif

#endif
