// main() of each tool: NMT_APP_MAIN names its entry point (entry_points.h),
// set by CMakeLists.txt for each executable.
#include "entry_points.h"

int main(int argc, char** argv) { return nmt::apps::NMT_APP_MAIN(argc, argv); }
