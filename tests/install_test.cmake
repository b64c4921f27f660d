# Installs the build into a prefix of its own, then builds and runs a consumer project against it with
# find_package(vram) (tests/install), and a C program with pkg-config. Run by ctest:
#   cmake -DBUILD=<build dir> -DSOURCE=<repo> -DWORK=<folder> -DLIBDIR=<lib dir name> -DGENERATOR=<gen>
#         -DCC=<c compiler> -P install_test.cmake
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "${cmd} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()
file(REMOVE_RECURSE ${WORK})
set(prefix ${WORK}/prefix)
run(${CMAKE_COMMAND} --install ${BUILD} --prefix ${prefix})
foreach(f bin/vram include/vram/vram.h include/vram/pool/pool_resource.hpp ${LIBDIR}/libvram.so ${LIBDIR}/libvram.a
          ${LIBDIR}/cmake/vram/vramConfig.cmake ${LIBDIR}/pkgconfig/vram.pc)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "the install has no ${f}")
  endif()
endforeach()
run(${CMAKE_COMMAND} -S ${SOURCE}/tests/install -B ${WORK}/consumer -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${prefix})
run(${CMAKE_COMMAND} --build ${WORK}/consumer)
set(ENV{VRAM_DEVICE} sim:64MiB)
set(ENV{LD_LIBRARY_PATH} ${prefix}/${LIBDIR})
run(${WORK}/consumer/consumer_c)
run(${WORK}/consumer/consumer_cpp)
run(${prefix}/bin/vram --version)
# pkg-config, as a Makefile would use it.
set(ENV{PKG_CONFIG_PATH} ${prefix}/${LIBDIR}/pkgconfig)
execute_process(COMMAND pkg-config --cflags --libs vram OUTPUT_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config --cflags --libs vram failed")
endif()
separate_arguments(flags UNIX_COMMAND "${flags}")
run(${CC} ${SOURCE}/tests/install/main.c ${flags} -o ${WORK}/pkgconfig_c)
run(${WORK}/pkgconfig_c)
