# build_commit.cmake — run by every build (CMakeLists.txt's tb_build_commit target), not only at configure
# time: a checkout that moved on since `cmake` ran must not label its result rows with the old commit.
# Writes OUT (build_commit.h) with the checkout's commit, "-dirty" when tracked files differ from it, or
# "unknown" outside git; rewrites it only when that changes, so an unchanged commit recompiles nothing.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY "${SRC}"
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT commit)
  set(commit "unknown")
else()
  execute_process(COMMAND git diff --quiet HEAD -- WORKING_DIRECTORY "${SRC}" RESULT_VARIABLE dirty
                  OUTPUT_QUIET ERROR_QUIET)
  if(dirty EQUAL 1)
    string(APPEND commit "-dirty")
  endif()
endif()
set(text "/* build_commit.h — written at every build by tools/build_commit.cmake: the checkout built. */\n")
string(APPEND text "#define TB_GIT_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
