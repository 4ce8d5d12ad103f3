/* Stand-in for the macOS SDK's header, only for .ci/run's macOS clippy check (ring's C
   code is compiled by its build script even for a check; nothing built here is run). */
#pragma once
#define TARGET_OS_MAC 1
#define TARGET_OS_OSX 1
#define TARGET_OS_IPHONE 0
#define TARGET_OS_IOS 0
#define TARGET_OS_WATCH 0
#define TARGET_OS_TV 0
#define TARGET_OS_SIMULATOR 0
