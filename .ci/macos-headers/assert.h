/* Stand-in for the macOS SDK's header (see TargetConditionals.h). */
#pragma once
#define assert(x) ((void)0)
