# Checks that libvram.so exports the C API of include/vram/vram.h and no other symbol,
# and that it can be loaded with dlopen anywhere (no STATIC_TLS flag).
# Run by ctest: cmake -DLIBRARY=<path of libvram.so> -DNM=<nm> -DREADELF=<readelf> -P capi_exports.cmake
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
             vram_get_stats_sized
             vram_last_error vram_last_error_code vram_malloc vram_record_start vram_record_stop vram_record_stream
             vram_reset_peak_stats vram_set_limit vram_snapshot_json vram_trim)
list(SORT exported)
list(SORT expected)
if(NOT exported STREQUAL expected)
  message(FATAL_ERROR "libvram.so exports:\n  ${exported}\nbut the C API is:\n  ${expected}")
endif()
list(LENGTH exported n)
message(STATUS "libvram.so exports exactly the ${n} functions of the C API")

# Loaded with dlopen (PyTorch, ctypes), a library marked STATIC_TLS needs its whole TLS block in glibc's small
# static surplus, and fails to load once that is used ("cannot allocate memory in static TLS block").
execute_process(COMMAND ${READELF} -d ${LIBRARY} OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${READELF} -d failed on ${LIBRARY}")
endif()
if(dynamic MATCHES "STATIC_TLS")
  message(FATAL_ERROR "libvram.so is marked STATIC_TLS: a thread-local variable uses the initial-exec model")
endif()
message(STATUS "libvram.so is not marked STATIC_TLS")
