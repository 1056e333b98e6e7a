/* SPDX-License-Identifier: Apache-2.0 */
/* Where devgate's files live by default; daemon, CLI and doctor share them. */
#ifndef DEVGATE_PATHS_H
#define DEVGATE_PATHS_H

#define DG_DEFAULT_SOCKET "/run/devgate/devgated.sock"
#define DG_DEFAULT_PIN_ROOT "/sys/fs/bpf/devgate"
/* Records describe kernel objects, which die at reboot: tmpfs (state.h). */
#define DG_DEFAULT_STATE_DIR "/run/devgate/state"
/* Where devgate before 0.2 kept them; imported once at start. */
#define DG_LEGACY_STATE_DIR "/var/lib/devgate"

#endif
