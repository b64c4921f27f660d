# Installs the Python package with pip into a folder of its own (offline: no build isolation, no
# dependencies), then imports it from there, away from the source tree, and reads device 0's statistics
# through libvram.so (VRAM_LIBRARY). Run by ctest:
#   cmake -DPYTHON=<python3> -DSOURCE=<repo>/python -DWORK=<folder> -P python_install.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(ENV{PIP_ROOT_USER_ACTION} ignore)
set(ENV{PIP_DISABLE_PIP_VERSION_CHECK} 1)
execute_process(COMMAND ${PYTHON} -m pip install --quiet --no-build-isolation --no-deps --no-cache-dir
                        --target ${WORK}/site ${SOURCE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pip install ${SOURCE} failed (${rc}):\n${out}\n${err}")
endif()
set(ENV{PYTHONPATH} ${WORK}/site)
set(ENV{SITE} ${WORK}/site)
execute_process(COMMAND ${PYTHON} -c
                "import vram, os; assert os.path.dirname(vram.__file__).startswith(os.environ['SITE']), vram.__file__; print(vram.__file__, vram.memory_stats(0)['allocated_bytes.all.current'])"
                WORKING_DIRECTORY ${WORK}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "importing the installed package failed (${rc}):\n${out}\n${err}")
endif()
message(STATUS "installed and imported: ${out}")
