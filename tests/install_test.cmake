# Installs the build and uses the install as a user's project would, with no LD_LIBRARY_PATH anywhere:
#  - the commands of docs/c-api.md, "Building against it" (its ```sh block), verbatim, in a folder holding
#    `build` (this build) and `tests` (the repository's), with HOME a folder of this test's own; all but the
#    block's `cmake --build`, which is the build under test. They install, build tests/install/main.c with
#    pkg-config and run it;
#  - the exported targets: no compile option, and no include folder outside the install;
#  - find_package(vram): tests/install (vram::c from C, vram::vram from C++); vram::c alone (COMPONENTS c)
#    where fmt, nlohmann_json, ZLIB and CUDA are not found, and the same without COMPONENTS refused with a
#    message naming them; tests/install built by clang++ (where it is) without CUDA's headers; and, where the
#    build had cuda.h and CUDAToolkit is found, a program that includes vram/device/cuda_device.hpp;
#  - libvram_torch.so beside libvram.so, where the build made it, found there by the Python package.
# Run by ctest:
#   cmake -DBUILD=<build dir> -DSOURCE=<repo> -DWORK=<folder> -DLIBDIR=<lib dir name> -DGENERATOR=<gen>
#         -DCUDA_H=<0|1> -DTORCH_SHIM=<0|1> -P install_test.cmake
cmake_minimum_required(VERSION 3.25)
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "${cmd} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
  set(out "${out}" PARENT_SCOPE)
endfunction()
file(REMOVE_RECURSE ${WORK})
unset(ENV{LD_LIBRARY_PATH})
set(ENV{VRAM_DEVICE} sim:64MiB)

# docs/c-api.md's commands.
file(READ ${SOURCE}/docs/c-api.md doc)
string(FIND "${doc}" "\n## Building against it\n" at)
if(at EQUAL -1)
  message(FATAL_ERROR "docs/c-api.md has no section 'Building against it'")
endif()
string(SUBSTRING "${doc}" ${at} -1 doc)
string(FIND "${doc}" "\n```sh\n" at)
if(at EQUAL -1)
  message(FATAL_ERROR "docs/c-api.md, 'Building against it', has no ```sh block")
endif()
math(EXPR at "${at} + 7")
string(SUBSTRING "${doc}" ${at} -1 doc)
string(FIND "${doc}" "\n```" at)
string(SUBSTRING "${doc}" 0 ${at} block)
string(REGEX REPLACE "\ncmake --build [^\n]*" "" commands "\n${block}")
string(REPLACE "/lib/pkgconfig" "/${LIBDIR}/pkgconfig" commands "${commands}")
message(STATUS "docs/c-api.md's commands, as run:\n${commands}")
file(MAKE_DIRECTORY ${WORK}/run ${WORK}/home)
file(CREATE_LINK ${BUILD} ${WORK}/run/build SYMBOLIC)
file(CREATE_LINK ${SOURCE}/tests ${WORK}/run/tests SYMBOLIC)
file(WRITE ${WORK}/documented.sh "set -e\n${commands}\n")
set(ENV{HOME} ${WORK}/home)
execute_process(COMMAND sh ${WORK}/documented.sh WORKING_DIRECTORY ${WORK}/run
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\nconsumer_c: 1024 bytes allocated and freed through vram::c\n$")
  message(FATAL_ERROR "docs/c-api.md's commands failed (${rc}), or the program printed otherwise:\n${out}\n${err}")
endif()
message(STATUS "${out}")
set(prefix ${WORK}/home/vram)
foreach(f bin/vram include/vram/vram.h include/vram/pool/pool_resource.hpp ${LIBDIR}/libvram.so ${LIBDIR}/libvram.a
          ${LIBDIR}/cmake/vram/vramConfig.cmake ${LIBDIR}/pkgconfig/vram.pc)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "the install has no ${f}")
  endif()
endforeach()
run(${prefix}/bin/vram --version)

# What the exported targets ask of a user's compiler: include folders inside the install, no options.
file(GLOB exports ${prefix}/${LIBDIR}/cmake/vram/vram*Targets.cmake)
if(NOT exports MATCHES "vramCTargets.cmake;.*vramTargets.cmake$")
  message(FATAL_ERROR "the install has not vramCTargets.cmake and vramTargets.cmake: ${exports}")
endif()
foreach(file IN LISTS exports)
  file(READ ${file} text)
  if(text MATCHES "[^\n]*(INTERFACE_COMPILE_OPTIONS|mtls-dialect)[^\n]*")
    message(FATAL_ERROR "${file} gives its users compile options: ${CMAKE_MATCH_0}")
  endif()
  string(REGEX MATCHALL "INTERFACE_INCLUDE_DIRECTORIES \"[^\"]*\"" includes "${text}")
  foreach(entry IN LISTS includes)
    string(REGEX REPLACE "^INTERFACE_INCLUDE_DIRECTORIES \"|\"$" "" entry "${entry}")
    if(NOT entry MATCHES "^\\\${_IMPORT_PREFIX}/")
      message(FATAL_ERROR "${file} gives its users the include folder ${entry}, outside the install")
    endif()
  endforeach()
endforeach()

# find_package(vram): both targets, from C and C++.
run(${CMAKE_COMMAND} -S ${SOURCE}/tests/install -B ${WORK}/consumer -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${prefix})
run(${CMAKE_COMMAND} --build ${WORK}/consumer)
run(${WORK}/consumer/consumer_c)
run(${WORK}/consumer/consumer_cpp)

# vram::c alone needs nothing but the install; both targets need vram::vram's dependencies.
set(nothing_else -DCMAKE_DISABLE_FIND_PACKAGE_fmt=ON -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON
                 -DCMAKE_DISABLE_FIND_PACKAGE_ZLIB=ON -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON)
file(WRITE ${WORK}/c_only/CMakeLists.txt "cmake_minimum_required(VERSION 3.16)
project(vram_c_only LANGUAGES C)
find_package(vram 0.1 REQUIRED COMPONENTS c)
if(TARGET vram::vram)
  message(FATAL_ERROR \"COMPONENTS c gave vram::vram too\")
endif()
add_executable(consumer_c ${SOURCE}/tests/install/main.c)
target_link_libraries(consumer_c PRIVATE vram::c)
")
run(${CMAKE_COMMAND} -S ${WORK}/c_only -B ${WORK}/c_only/build -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${prefix}
    ${nothing_else})
run(${CMAKE_COMMAND} --build ${WORK}/c_only/build)
run(${WORK}/c_only/build/consumer_c)
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE}/tests/install -B ${WORK}/refused -G ${GENERATOR}
                        -DCMAKE_PREFIX_PATH=${prefix} ${nothing_else}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX REPLACE "[ \n]+" " " said "${err}")
string(CONCAT refusal "vram::vram needs fmt, nlohmann_json, ZLIB, not found here \\(find_package\\(vram COMPONENTS c\\) "
       "gives vram::c alone, which needs none of them\\)")
if(rc EQUAL 0 OR NOT said MATCHES "${refusal}")
  message(FATAL_ERROR "find_package(vram) without fmt, nlohmann_json and ZLIB: exit ${rc}, not the refusal "
                      "expected:\n${out}\n${err}")
endif()
message(STATUS "refused, as it should be:\n${err}")

# vram::vram by another compiler (Clang before 19 knows no -mtls-dialect=gnu2), without CUDA's headers.
find_program(clangxx clang++)
find_program(clang clang)
set(compilers "")
if(clangxx AND clang)
  set(compilers -DCMAKE_C_COMPILER=${clang} -DCMAKE_CXX_COMPILER=${clangxx})
else()
  message(STATUS "no clang++ here: tests/install without CUDA's headers by the default compiler")
endif()
run(${CMAKE_COMMAND} -S ${SOURCE}/tests/install -B ${WORK}/other -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON ${compilers})
run(${CMAKE_COMMAND} --build ${WORK}/other)
run(${WORK}/other/consumer_c)
run(${WORK}/other/consumer_cpp)

# The one installed header that includes cuda.h (where the build had it), with CUDA's headers found.
if(CUDA_H)
  file(WRITE ${WORK}/cuda_header/main.cpp [=[
// Includes the CUDA device's header, which includes cuda.h in a build that had it.
#include <cstdio>

#include "vram/device/cuda_device.hpp"

int main() {
  std::printf("cuda_header: cuda_built() %d, cuda.h of CUDA %d\n", vram::cuda_built() ? 1 : 0, CUDA_VERSION);
  return vram::cuda_built() ? 0 : 1;
}
]=])
  file(WRITE ${WORK}/cuda_header/CMakeLists.txt [=[
cmake_minimum_required(VERSION 3.16)
project(vram_cuda_header LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(vram 0.1 REQUIRED COMPONENTS vram)
if(CUDAToolkit_FOUND)
  add_executable(cuda_header main.cpp)
  target_link_libraries(cuda_header PRIVATE vram::vram)
else()
  message(STATUS "no CUDA toolkit found: vram/device/cuda_device.hpp cannot be compiled here")
endif()
]=])
  run(${CMAKE_COMMAND} -S ${WORK}/cuda_header -B ${WORK}/cuda_header/build -G ${GENERATOR}
      -DCMAKE_PREFIX_PATH=${prefix})
  run(${CMAKE_COMMAND} --build ${WORK}/cuda_header/build)
  if(EXISTS ${WORK}/cuda_header/build/cuda_header)
    run(${WORK}/cuda_header/build/cuda_header)
  endif()
endif()

# The PyTorch shim beside libvram.so, where vram.torch looks for it.
if(TORCH_SHIM)
  find_program(python python3 REQUIRED)
  set(ENV{PYTHONPATH} ${SOURCE}/python)
  set(ENV{VRAM_LIBRARY} ${prefix}/${LIBDIR}/libvram.so)
  run(${python} -c "import ctypes, vram.torch as t\np = t._allocator_library()\nctypes.CDLL(p[0])\nprint(p)")
  if(NOT out STREQUAL "('${prefix}/${LIBDIR}/libvram_torch.so', 'vram_torch_malloc', 'vram_torch_free')\n")
    message(FATAL_ERROR "vram.torch did not find the installed libvram_torch.so: ${out}")
  endif()
endif()
