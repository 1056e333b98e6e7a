// SPDX-License-Identifier: Apache-2.0
/*
 * Parses the address a TCP listener binds ("ADDR:PORT", "[ADDR6]:PORT"),
 * so devgate.conf is checked with the very parser the listener uses. Pure
 * string work: it opens no socket and resolves no host name.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "listen_addr.h"
#include "util.h"

/*
 * Splits s into its host (without brackets) and port. *bracketed says
 * whether the host was in brackets, as an IPv6 address must be. 0, or
 * -EINVAL when there is no host, no port, or a port outside 1 to 65535.
 */
static int parse_host_port(const char *s, char *host, size_t host_len, uint32_t *port,
			   bool *bracketed)
{
	const char *sep;
	size_t len;

	*bracketed = s[0] == '[';
	if (*bracketed) {
		const char *end = strchr(s, ']');

		if (!end || end[1] != ':')
			return -EINVAL;
		s++;
		len = (size_t)(end - s);
		sep = end + 1;
	} else {
		sep = strrchr(s, ':');
		if (!sep)
			return -EINVAL;
		len = (size_t)(sep - s);
	}
	if (len == 0 || len >= host_len)
		return -EINVAL;
	memcpy(host, s, len);
	host[len] = '\0';
	if (parse_u32(sep + 1, port) < 0 || *port == 0 || *port > 65535)
		return -EINVAL;
	return 0;
}

int listen_addr_parse(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len)
{
	char host[INET6_ADDRSTRLEN];
	struct sockaddr_storage ss = { 0 };
	bool bracketed;
	uint32_t port;
	int r = parse_host_port(s, host, sizeof(host), &port, &bracketed);

	if (r < 0)
		return r;
	if (bracketed) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

		if (inet_pton(AF_INET6, host, &sin6->sin6_addr) != 1)
			return -EINVAL;
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		*ret_len = sizeof(*sin6);
	} else {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		if (inet_pton(AF_INET, host, &sin->sin_addr) != 1)
			return -EINVAL;
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		*ret_len = sizeof(*sin);
	}
	*ret = ss;
	return 0;
}
