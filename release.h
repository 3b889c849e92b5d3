/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The release this tree builds (tagged v<CFS_RELEASE> in git when it is made).  Feature bits
 * and protocol versions name the release that knows them first by this string; see
 * docs/upgrading.md for what each release reads and speaks. */
#ifndef CFS_RELEASE_H
#define CFS_RELEASE_H

#define CFS_RELEASE "0.2"

#endif
