# Writes OUT (a header defining ALISA_GIT_VERSION) from `git describe
# --always --dirty` in SRC at every build, rewriting it only when the
# version changed, so `alisa version` and the sweep database's code_version
# name the code the binary was built from, not the code CMake configured.
execute_process(COMMAND git describe --always --dirty
                WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE v OUTPUT_STRIP_TRAILING_WHITESPACE
                ERROR_QUIET)
if(NOT v)
  set(v "unknown")
endif()
set(text "#define ALISA_GIT_VERSION \"${v}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUT} "${text}")
endif()
