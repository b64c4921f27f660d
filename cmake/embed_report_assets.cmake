# Writes the report page's files into a C++ source (src/vram/report/report_assets.hpp), as byte arrays.
# cmake -DWEB=<web dir> -DDOCS=<docs dir> -DOUT=<file.cpp> -P embed_report_assets.cmake
# The chart library comes from web/node_modules (npm ci in web/, which scripts/setup runs where npm is);
# without it the arrays are empty and the page draws static charts.
function(bytes_of var path)
  set(body "")
  if(EXISTS "${path}")
    file(READ "${path}" hex HEX)
    string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
  endif()
  set(${var} "${body}" PARENT_SCOPE)
endfunction()

set(uplot "${WEB}/node_modules/uplot")
set(version "")
if(EXISTS "${uplot}/package.json")
  file(READ "${uplot}/package.json" manifest)
  string(JSON v GET "${manifest}" version)
  set(version "uPlot ${v}")
endif()

set(text "// Written by cmake/embed_report_assets.cmake from web/ and docs/: do not edit.\n")
string(APPEND text "#include \"vram/report/report_assets.hpp\"\n\nnamespace vram::report_assets {\nnamespace {\n")
set(functions "")
foreach(pair "page;${WEB}/report.html" "script;${WEB}/report.js" "style;${WEB}/report.css"
             "chart_library;${uplot}/dist/uPlot.iife.min.js" "chart_style;${uplot}/dist/uPlot.min.css"
             "architecture;${DOCS}/architecture-flow.svg")
  list(GET pair 0 name)
  list(GET pair 1 path)
  if(version STREQUAL "" AND name MATCHES "^chart_")
    set(path "")  # no library: nothing of it, even where a partial install left files
  endif()
  bytes_of(body "${path}")
  string(APPEND text "const unsigned char ${name}_bytes[] = {${body}0};\n")
  string(APPEND functions "std::string_view ${name}() { return {reinterpret_cast<const char*>(${name}_bytes), sizeof ${name}_bytes - 1}; }\n")
endforeach()
string(APPEND text "}  // namespace\n\n${functions}std::string_view chart_version() { return \"${version}\"; }\n\n}  // namespace vram::report_assets\n")
file(WRITE "${OUT}.tmp" "${text}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
