# Runs every `build/vram ...` line of README.md's indented examples, in a folder of its own where `build/vram`
# is the tool under test and `examples` the repository's, so they run as on a fresh clone. Run by ctest:
#   cmake -DSOURCE=<repo> -DVRAM=<path of the vram tool> -DWORK=<folder> -P readme_examples.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/build)
file(CREATE_LINK ${VRAM} ${WORK}/build/vram SYMBOLIC)
file(CREATE_LINK ${SOURCE}/examples ${WORK}/examples SYMBOLIC)
file(STRINGS ${SOURCE}/README.md lines REGEX "^    build/vram ")
list(LENGTH lines n)
if(n EQUAL 0)
  message(FATAL_ERROR "README.md has no 'build/vram' example lines")
endif()
foreach(line IN LISTS lines)
  string(REGEX REPLACE "^    " "" command "${line}")
  string(REGEX REPLACE "[ ]+#.*$" "" command "${command}")  # the comment after the command
  execute_process(COMMAND sh -c "${command}" WORKING_DIRECTORY ${WORK} RESULT_VARIABLE rc OUTPUT_QUIET
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "README example failed (${rc}): ${command}\n${err}")
  endif()
  message(STATUS "ok: ${command}")
endforeach()
message(STATUS "${n} README examples ran")
