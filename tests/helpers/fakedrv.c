// SPDX-License-Identifier: Apache-2.0
/* Every driver library of a fixture host: it says it is the fixture's. */
const char *devgate_fake_driver(void);

const char *devgate_fake_driver(void)
{
	return "devgate-fixture";
}
