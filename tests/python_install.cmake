# Installs the Python package as docs/python.md says, with no network: a virtual environment in WORK that sees
# the interpreter's own setuptools and wheel (--system-site-packages: Debian's, from scripts/setup), and
# `pip install --no-build-isolation --no-index` into it; then imports the package from there, away from the
# source tree, and reads device 0 through libvram.so (VRAM_LIBRARY). Where the interpreter has no ensurepip, so
# that `python3 -m venv` makes no environment with pip (Debian's python3-venv is missing), it prints
# "skipped: ..." and ends, which ctest counts as a skip. Run by ctest:
#   cmake -DPYTHON=<python3> -DSOURCE=<repo>/python -DWORK=<folder> -P python_install.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(ENV{PIP_ROOT_USER_ACTION} ignore)
set(ENV{PIP_DISABLE_PIP_VERSION_CHECK} 1)
unset(ENV{PYTHONPATH})
execute_process(COMMAND ${PYTHON} -c "import ensurepip" RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
if(NOT rc EQUAL 0)
  message(STATUS "skipped: ${PYTHON} has no ensurepip, so it makes no virtual environment with pip; install "
                 "Debian's python3-venv (scripts/setup does)")
  return()
endif()
execute_process(COMMAND ${PYTHON} -m venv --system-site-packages ${WORK}/venv
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PYTHON} -m venv --system-site-packages ${WORK}/venv failed (${rc}):\n${out}\n${err}")
endif()
execute_process(COMMAND ${WORK}/venv/bin/pip install --no-build-isolation --no-index ${SOURCE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pip install --no-build-isolation --no-index ${SOURCE} failed (${rc}):\n${out}\n${err}")
endif()
execute_process(COMMAND ${WORK}/venv/bin/python -c
                "import sys, vram; assert vram.__file__.startswith(sys.prefix + '/'), vram.__file__; print(vram.__file__, vram.device_name(0), vram.memory_stats(0)['allocated_bytes.all.current'])"
                WORKING_DIRECTORY ${WORK}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "importing the installed package failed (${rc}):\n${out}\n${err}")
endif()
message(STATUS "installed and imported: ${out}")
