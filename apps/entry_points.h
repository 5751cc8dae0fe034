// The tools' entry points. Each parses its command line, runs the tool and
// returns the process's exit code (tools/app.h); none returns by exception.
// apps/main.cc makes each one an executable, and the tests call them in
// processes forked from the test binary (tests/tool_forker.h).
#pragma once

namespace nmt::apps {

int train_main(int argc, char** argv);      // nmt-train (apps/nmt_train.cc)
int translate_main(int argc, char** argv);  // nmt-translate (apps/nmt_translate.cc)
int align_main(int argc, char** argv);      // nmt-align (apps/nmt_align.cc)
int serve_main(int argc, char** argv);      // nmt-serve (apps/nmt_serve.cc), built where cpp-httplib is found

}  // namespace nmt::apps
