# Checks that libvram.so exports the C API of include/vram/vram.h and no other symbol.
# Run by ctest: cmake -DLIBRARY=<path of libvram.so> -DNM=<nm> -P capi_exports.cmake
execute_process(COMMAND ${NM} -D --defined-only ${LIBRARY} OUTPUT_VARIABLE listing RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D failed on ${LIBRARY}")
endif()
string(REPLACE "\n" ";" lines "${listing}")
set(exported "")
foreach(line IN LISTS lines)
  # "<address> <type> <name>[@version]"
  if(line MATCHES "^[0-9a-fA-F]+ [A-Za-z] ([^ @]+)")
    list(APPEND exported ${CMAKE_MATCH_1})
  endif()
endforeach()
set(expected vram_device_count vram_device_name vram_free vram_free_string vram_get_limit vram_get_stats
             vram_last_error vram_last_error_code vram_malloc vram_record_stream vram_set_limit vram_snapshot_json
             vram_trim)
list(SORT exported)
list(SORT expected)
if(NOT exported STREQUAL expected)
  message(FATAL_ERROR "libvram.so exports:\n  ${exported}\nbut the C API is:\n  ${expected}")
endif()
list(LENGTH exported n)
message(STATUS "libvram.so exports exactly the ${n} functions of the C API")
