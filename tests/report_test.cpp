// vram report's parts: the envelope that keeps every peak, the state at a moment, its cells, the failure
// sentence, the data of one trace, and the page around it. Expected values are worked out in the comments.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "vram/core/error.hpp"
#include "vram/core/size.hpp"
#include "vram/report/envelope.hpp"
#include "vram/report/html_page.hpp"
#include "vram/report/memory_map.hpp"
#include "vram/report/report_data.hpp"
#include "vram/report/svg_chart.hpp"
#include "vram/report/table.hpp"
#include "vram/workload/trace_builder.hpp"

namespace vram {
namespace {

using kind = device_region::kind;
using span_list = std::vector<std::pair<std::size_t, std::size_t>>;

// ---- envelope ----------------------------------------------------------------------------------------------

TEST(Envelope, KeepsAShortSpikeAndCarriesTheValueIntoLaterBuckets) {
  // Four buckets of 25 over [0, 100]: times 0, 10, 11 fall in bucket 0, 30 in 1, 60 in 2, 99 in 3.
  envelope e(0, 100, 4);
  e.add(0, 5);
  e.add(10, 50);  // held for 1 time unit only
  e.add(11, 7);
  e.add(30, 7);
  e.add(60, 20);
  e.add(99, 3);
  // Bucket 0 starts at the value before any add (0) and sees 5, 50, 7; bucket 1 enters at 7; bucket 2 enters
  // at 7 and sees 20; bucket 3 enters at 20 and sees 3.
  EXPECT_EQ(e.highs(), (std::vector<std::size_t>{50, 7, 20, 20}));
  EXPECT_EQ(e.lows(), (std::vector<std::size_t>{0, 7, 7, 3}));
  const auto h = e.highs();
  EXPECT_EQ(*std::max_element(h.begin(), h.end()), 50u);  // the peak, exactly
}

TEST(Envelope, FillsSkippedAndTrailingBuckets) {
  envelope e(0, 100, 10);
  e.add(0, 1);
  e.add(95, 9);  // bucket 9; buckets 1-8 held 1 throughout
  EXPECT_EQ(e.highs(), (std::vector<std::size_t>{1, 1, 1, 1, 1, 1, 1, 1, 1, 9}));
  EXPECT_EQ(e.lows(), (std::vector<std::size_t>{0, 1, 1, 1, 1, 1, 1, 1, 1, 1}));
  envelope f(0, 100, 4);
  f.add(0, 4);  // nothing after: buckets 1-3 hold 4
  EXPECT_EQ(f.highs(), (std::vector<std::size_t>{4, 4, 4, 4}));
  EXPECT_EQ(f.lows(), (std::vector<std::size_t>{0, 4, 4, 4}));
}

TEST(Envelope, BucketsOfTimes) {
  envelope e(1000, 2000, 4);  // buckets start at 1000, 1250, 1500, 1750
  EXPECT_EQ(e.bucket_of(1000), 0u);
  EXPECT_EQ(e.bucket_of(1249), 0u);
  EXPECT_EQ(e.bucket_of(1250), 1u);
  EXPECT_EQ(e.bucket_of(1999), 3u);
  EXPECT_EQ(e.bucket_of(2000), 3u);  // the end falls in the last bucket
  EXPECT_DOUBLE_EQ(e.bucket_start(2), 1500.0);
  envelope point(5, 5, 3);  // a trace whose rows share one time: everything in bucket 0
  point.add(5, 8);
  point.add(5, 2);
  EXPECT_EQ(point.highs(), (std::vector<std::size_t>{8, 2, 2}));
  EXPECT_EQ(point.lows(), (std::vector<std::size_t>{0, 2, 2}));
  EXPECT_THROW(envelope(0, 1, 0), usage_error);
  EXPECT_THROW(envelope(2, 1, 4), usage_error);
  // A span of a year in microseconds times a million buckets overflows 64 bits: the bucket is still right.
  const std::int64_t year = std::int64_t{365} * 86400 * 1000000;
  envelope wide(0, year, 1000000);
  EXPECT_EQ(wide.bucket_of(year / 2), 500000u);
}

TEST(Envelope, ATimeGoingBackIsCaughtInDebugBuilds) {
#if defined(VRAM_DEBUG_VALIDATE) && VRAM_DEBUG_VALIDATE
  envelope e(0, 100, 4);
  e.add(60, 1);                                   // bucket 2
  EXPECT_THROW(e.add(10, 2), invariant_error);    // bucket 0: before the last time added
  EXPECT_THROW(e.add(101, 2), invariant_error);   // past t1
  e.add(99, 3);                                   // forward again: fine
  EXPECT_EQ(e.highs().back(), 3u);
#else
  GTEST_SKIP() << "VRAM_ASSERT is compiled in debug builds only";
#endif
}

// ---- the state at a moment ---------------------------------------------------------------------------------

TEST(MemoryMap, StripsLiveRangesAndFreePieces) {
  // Two handles mapped side by side at 16 MiB (one strip of 4 MiB), one handle alone at 24 MiB, and a legacy
  // block of 4 MiB at 64 MiB.
  const std::vector<device_region> regions = {{16 * MiB, 2 * MiB, kind::mapping, 1},
                                              {18 * MiB, 2 * MiB, kind::mapping, 2},
                                              {24 * MiB, 2 * MiB, kind::mapping, 3},
                                              {64 * MiB, 4 * MiB, kind::legacy_block, 0}};
  // Blocks: [16, 17) and [17.5, 19) MiB (the second across the handles' boundary), [24, 26) and [65, 66).
  const std::vector<std::pair<device_ptr, std::size_t>> blocks = {
      {65 * MiB, 1 * MiB}, {16 * MiB, 1 * MiB}, {17 * MiB + 512 * KiB, 1536 * KiB}, {24 * MiB, 2 * MiB}};
  const memory_state s = capture_state(regions, blocks, memory_info{100 * MiB, 200 * MiB});
  ASSERT_EQ(s.strips.size(), 3u);
  EXPECT_EQ(s.strips[0].va, 16 * MiB);
  EXPECT_EQ(s.strips[0].bytes, 4 * MiB);
  EXPECT_EQ(s.strips[0].regions, 2u);
  EXPECT_EQ(s.strips[0].live, (span_list{{0, 1 * MiB}, {1536 * KiB, 3 * MiB}}));
  EXPECT_EQ(s.strips[1].live, (span_list{{0, 2 * MiB}}));
  EXPECT_EQ(s.strips[2].what, kind::legacy_block);
  EXPECT_EQ(s.strips[2].live, (span_list{{1 * MiB, 2 * MiB}}));
  EXPECT_EQ(s.held_bytes, 10 * MiB);                  // 4 + 2 + 4
  EXPECT_EQ(s.live_bytes, 5 * MiB + 512 * KiB);       // 1 + 1.5 + 2 + 1
  // Holes: [1, 1.5) and [3, 4) in the first strip, [0, 1) and [2, 4) in the legacy block.
  EXPECT_EQ(s.free_pieces, 4u);
  EXPECT_EQ(s.largest_free, 2 * MiB);
  EXPECT_EQ(s.device_free, 100 * MiB);
  EXPECT_EQ(s.device_total, 200 * MiB);
}

TEST(MemoryMap, AdjacentBlocksMergeAndAnEmptyStripIsOneHole) {
  const std::vector<device_region> regions = {{0, 4 * MiB, kind::legacy_block, 0}, {8 * MiB, 2 * MiB, kind::legacy_page, 0}};
  const std::vector<std::pair<device_ptr, std::size_t>> blocks = {{0, 1 * MiB}, {1 * MiB, 1 * MiB}};
  const memory_state s = capture_state(regions, blocks, {});
  EXPECT_EQ(s.strips[0].live, (span_list{{0, 2 * MiB}}));
  EXPECT_TRUE(s.strips[1].live.empty());
  EXPECT_EQ(s.free_pieces, 2u);  // [2, 4) MiB and the whole page
  EXPECT_EQ(s.largest_free, 2 * MiB);
  // Mappings that are not side by side, and a mapping after a legacy block, stay strips of their own.
  const std::vector<device_region> apart = {{0, 2 * MiB, kind::mapping, 1}, {4 * MiB, 2 * MiB, kind::mapping, 2},
                                            {8 * MiB, 2 * MiB, kind::legacy_block, 0}, {10 * MiB, 2 * MiB, kind::mapping, 3}};
  EXPECT_EQ(capture_state(apart, {}, {}).strips.size(), 4u);
}

TEST(MemoryMap, CellsInEighths) {
  map_strip s;
  s.bytes = 4 * MiB;
  s.live = {{0, 1 * MiB}, {1536 * KiB, 3 * MiB}};
  EXPECT_EQ(encode_cells(s, 1 * MiB), "8 4 8 0");                 // the second cell is half live
  EXPECT_EQ(encode_cells(s, 512 * KiB), "8*2 0 8*3 0*2");
  EXPECT_EQ(encode_cells(s, 4 * MiB), "5");                       // 2.5 of 4 MiB: 5 eighths
  map_strip tiny;
  tiny.bytes = 1 * MiB;
  tiny.live = {{0, 1}};
  EXPECT_EQ(encode_cells(tiny, 1 * MiB), "1");  // one live byte is never drawn as empty
  tiny.live = {{0, 1 * MiB - 1}};
  EXPECT_EQ(encode_cells(tiny, 1 * MiB), "7");  // one free byte is never drawn as full
  map_strip shorter;  // a last cell shorter than the unit counts its own bytes
  shorter.bytes = 3 * MiB;
  shorter.live = {{2 * MiB, 3 * MiB}};
  EXPECT_EQ(encode_cells(shorter, 2 * MiB), "0 8");
  EXPECT_EQ(cell_unit(10 * MiB, 20), 512 * KiB);  // 20 cells of 512 KiB
  EXPECT_EQ(cell_unit(10 * MiB, 19), 1 * MiB);
  EXPECT_EQ(cell_unit(0, 5), 512u);
}

// ---- the failure sentence and one trace's data -------------------------------------------------------------

TEST(ReportData, FailureSentence) {
  const nlohmann::json failure = {{"policy", "torch-native"}, {"seconds", 3.0}, {"request_bytes", 40 * MiB}};
  const nlohmann::json state = {{"free_bytes", 14 * MiB}, {"free_pieces", 2}, {"largest_free", 8 * MiB},
                                {"device_free", 30 * MiB}};
  const std::vector<nlohmann::json> others = {
      {{"policy", "vram"}, {"failed_before", false}, {"live_bytes", 46 * MiB}, {"reserved_bytes", 48 * MiB}},
      {{"policy", "cuda-direct"}, {"failed_before", true}, {"live_bytes", 0}, {"reserved_bytes", 0}}};
  EXPECT_EQ(failure_sentence(failure, state, others),
            "At " + format_duration(3.0) + " a 40.00 MiB request failed under torch-native with 44.00 MiB free: "
            "14.00 MiB held by torch-native in 2 pieces, the largest 8.00 MiB, and 30.00 MiB left on the device. "
            "Under vram it would have succeeded, holding 1.04x the live bytes then. Under cuda-direct it failed too.");
  const nlohmann::json bare = {{"free_bytes", 0}, {"free_pieces", 0}, {"largest_free", 0}, {"device_free", 2 * MiB}};
  EXPECT_EQ(failure_sentence(failure, bare, {}),
            "At " + format_duration(3.0) + " a 40.00 MiB request failed under torch-native with 2.00 MiB free: "
            "nothing held spare by torch-native, and 2.00 MiB left on the device.");
}

/// A trace that fragments PyTorch's caching allocator on a 50 MiB device: a and b (6 MiB each) share one
/// 20 MiB segment; freeing a leaves b pinning it with 6 MiB free before and 8 MiB after; c (40 MiB) needs a
/// new segment, and 20 + 40 > 50 with nothing cached to give back.
trace pinned_segment() {
  trace_builder b("pinned");
  const auto a = b.alloc(0, 6 * MiB);
  const auto bb = b.alloc(1'000'000, 6 * MiB);
  b.free(2'000'000, a, 6 * MiB);
  const auto c = b.alloc(3'000'000, 40 * MiB);
  b.free(4'000'000, c, 40 * MiB);
  b.free(5'000'000, bb, 6 * MiB);
  return b.take();
}

report_options small_device(std::vector<std::string> policies) {
  report_options o;
  o.policies = std::move(policies);
  o.device.capacity = 50 * MiB;
  o.points = 8;
  o.moments = 5;
  o.curve = false;
  return o;
}

TEST(ReportData, FirstFailureOfAFragmentedSegment) {
  const trace t = pinned_segment();
  const nlohmann::json r = report_trace(t, small_device({"torch-native", "vram"}));
  ASSERT_EQ(r["failures"].size(), 1u);
  const auto& f = r["failures"][0];
  EXPECT_EQ(f["policy"], "torch-native");
  EXPECT_EQ(f["row"], 3);
  EXPECT_EQ(f["request_bytes"], 40 * MiB);
  const std::string sentence = f["sentence"];
  EXPECT_EQ(sentence.substr(0, sentence.find(" Under")),
            "At " + format_duration(3.0) + " a 40.00 MiB request failed under torch-native with 44.00 MiB free: "
            "14.00 MiB held by torch-native in 2 pieces, the largest 8.00 MiB, and 30.00 MiB left on the device.");
  EXPECT_NE(sentence.find("Under vram it would have succeeded"), std::string::npos);

  // The moment of the failure, as drawn: torch-native's one 20 MiB segment with b at [6, 12) MiB.
  const auto moment = std::find_if(r["moments"].begin(), r["moments"].end(),
                                   [](const nlohmann::json& m) { return m["row"] == 3; });
  ASSERT_NE(moment, r["moments"].end());
  // Row 3 is also the peak of live bytes (46 MiB under vram, which failed least) and vram's peak reserved.
  EXPECT_EQ((*moment)["labels"],
            nlohmann::json::array({"peak live", "first failure under torch-native", "peak reserved under vram"}));
  const auto& torch = (*moment)["states"][0];
  EXPECT_EQ(torch["policy"], "torch-native");
  EXPECT_EQ(torch["failed"], true);
  EXPECT_EQ(torch["held_bytes"], 20 * MiB);
  EXPECT_EQ(torch["held_live_bytes"], 6 * MiB);
  ASSERT_EQ(torch["strips"].size(), 1u);
  // The strip is [0, 6) MiB free, [6, 12) live, [12, 20) free, in cells of the trace's unit (a power of two:
  // at most 2 MiB here, since the widest any policy held is under 50 MiB and 16384 cells are allowed).
  const std::size_t unit = r["cell_bytes"];
  ASSERT_LE(unit, 2 * MiB);
  EXPECT_EQ(torch["strips"][0][1], 20 * MiB);
  EXPECT_EQ(torch["strips"][0][2], "segment");
  EXPECT_EQ(torch["strips"][0][4], fmt::format("0*{} 8*{} 0*{}", 6 * MiB / unit, 6 * MiB / unit, 8 * MiB / unit));
  const auto& vram = (*moment)["states"][1];
  EXPECT_EQ(vram["failed"], false);
  EXPECT_EQ(vram["live_bytes"], 46 * MiB);
}

TEST(ReportData, SeriesKeepTheReplaysPeaksAndMomentsHaveTheirLabels) {
  const trace t = pinned_segment();
  const nlohmann::json r = report_trace(t, small_device({"cuda-direct", "torch-native"}));
  ASSERT_EQ(r["results"].size(), 2u);
  const auto highest = [](const std::vector<std::size_t>& a) { return *std::max_element(a.begin(), a.end()); };
  // cuda-direct never fails here (6 + 40 = 46 <= 50 MiB live at most): its live is the series' live.
  EXPECT_EQ(r["series"]["live"]["from"], "cuda-direct");
  // Live bytes by bucket of 5/8 s: rows at 0 (6 MiB), 1 s (12), 2 s (6), 3 s (46), 4 s (6), 5 s (0) fall in
  // buckets 0, 1, 3, 4, 6, 7 (t * 8 / 5). Each bucket's highest counts the value it enters with: bucket 2
  // holds 12 throughout, bucket 3 enters at 12, bucket 5 holds 46, bucket 6 enters at 46, bucket 7 at 6.
  EXPECT_EQ(delta_decode(r["series"]["live"]["high"]),
            (std::vector<std::size_t>{6 * MiB, 12 * MiB, 12 * MiB, 12 * MiB, 46 * MiB, 46 * MiB, 46 * MiB, 6 * MiB}));
  EXPECT_EQ(r["results"][0]["peak_live_bytes"], 46 * MiB);
  for (std::size_t p = 0; p < 2; ++p)
    EXPECT_EQ(highest(delta_decode(r["series"]["reserved"][p]["high"])),
              r["results"][p]["peak_reserved_bytes"].get<std::size_t>());
  EXPECT_EQ(r["series"]["buckets"], 8u);
  EXPECT_DOUBLE_EQ(r["series"]["bucket_seconds"].get<double>(), 5.0 / 8);
  // fit ran for both; the table carries a fit column.
  EXPECT_FALSE(r["results"][0]["fit_bytes"].is_null());
  EXPECT_NE(r["table"].get<std::string>().find("fit"), std::string::npos);
  // Rows 0..5 at 0..5 s; peak live at row 3 (c allocated) under cuda-direct.
  bool peak = false;
  for (const auto& m : r["moments"])
    for (const auto& l : m["labels"])
      if (l == "peak live") peak = m["row"] == 3;
  EXPECT_TRUE(peak);
}

// --at labels: the time as asked, in seconds, once a row; past the trace's end, said to be its last row.
TEST(ReportData, AtMomentsAreLabelledWithTheTimeAskedAndAnEndPastTheTrace) {
  const trace t = pinned_segment();  // program rows 0..5 at 0..5 s
  report_options o = small_device({"vram"});
  o.fit = false;
  o.moments = 0;
  // 0.0005 s is row 0 (the next row is at 1 s); format_duration would have called it "0.000 s". 2 s is row 2,
  // asked twice: one label. 5 s is the last row itself; 9 s is past it, drawn at row 5 and said so.
  o.at_seconds = {0.0005, 2.0, 2.0, 5.0, 9.0};
  const nlohmann::json r = report_trace(t, o);
  std::map<std::size_t, std::vector<std::string>> at;  // row: its "at" labels
  for (const auto& m : r["moments"])
    for (const std::string l : m["labels"])
      if (l.starts_with("at ")) at[m["row"].get<std::size_t>()].push_back(l);
  EXPECT_EQ(at, (std::map<std::size_t, std::vector<std::string>>{
                    {0, {"at 0.0005 s"}},
                    {2, {"at 2 s"}},
                    {5, {"at 5 s", "at 9 s (after the trace's end: its last row)"}}}));
}

TEST(ReportData, DeltaEncoding) {
  const std::vector<std::size_t> v = {5, 5, 9, 2, 0, std::size_t{1} << 52};
  EXPECT_EQ(delta_encode(v), nlohmann::json::parse("[5, 0, 4, -7, -2, 4503599627370496]"));
  EXPECT_EQ(delta_decode(delta_encode(v)), v);
  EXPECT_TRUE(delta_encode({}).empty());
}

TEST(ReportData, ProgramRowAtATime) {
  trace_builder b("rows");
  const auto a = b.alloc(1'000'000, 512);  // rows at 1 s, 2 s, 4 s from the first row at 1 s
  const auto c = b.alloc(2'000'000, 512);
  b.free(4'000'000, a, 512);
  (void)c;
  const trace t = b.take();
  EXPECT_EQ(program_row_at(t, 0.0), 0u);
  EXPECT_EQ(program_row_at(t, 0.999), 0u);
  EXPECT_EQ(program_row_at(t, 1.0), 1u);
  EXPECT_EQ(program_row_at(t, 2.9), 1u);
  EXPECT_EQ(program_row_at(t, 100.0), 2u);
}

TEST(ReportData, CurveMarksTheDefaults) {
  const trace t = pinned_segment();
  report_options o = small_device({"vram"});
  o.curve = true;
  o.fit = false;
  const nlohmann::json r = report_trace(t, o);
  ASSERT_EQ(r["curve"].size(), curve_settings().size());
  int defaults = 0;
  for (const auto& p : r["curve"]) defaults += p["default"].get<bool>();
  EXPECT_EQ(defaults, 1);
  EXPECT_FALSE(r["results"][0].contains("fit_bytes"));  // --no-fit
}

// ---- the page ----------------------------------------------------------------------------------------------

TEST(ReportPage, SelfContainedWithItsDataEscaped) {
  trace t = pinned_segment();
  t.name = "</script><b>x</b>";
  nlohmann::json data = {{"device", {{"name", "simulated H200"}, {"capacity", 50 * MiB}}},
                         {"traces", nlohmann::json::array({report_trace(t, small_device({"vram"}))})}};
  const std::string page = render_report_page(data, false);
  EXPECT_EQ(page.find("{{"), std::string::npos);  // every slot filled
  EXPECT_EQ(page.find("</script><b>"), std::string::npos);
  EXPECT_NE(page.find("\\u003c/script><b>x\\u003c/b>"), std::string::npos);
  EXPECT_EQ(page.find("http://"), page.find("http://www.w3.org"));  // nothing fetched: only SVG's namespace
  EXPECT_EQ(page.find("https://"), std::string::npos);
  // Without the library: the static chart, with one line for live and one per policy.
  const auto at = page.find("\"static_chart\":");
  ASSERT_NE(at, std::string::npos);
  std::size_t lines = 0;
  for (auto p = page.find("class=\\\"series\\\""); p != std::string::npos; p = page.find("class=\\\"series\\\"", p + 1)) ++lines;
  EXPECT_EQ(lines, 2u);
  if (report_has_chart_library()) {
    const std::string with = render_report_page(data, true);
    EXPECT_NE(with.find("uPlot"), std::string::npos);
    EXPECT_EQ(with.find("\"static_chart\":"), std::string::npos);
  }
}

// Two points at 1.001 and 1.02: with room of a tenth of the larger value's 1% (0.0102) below, the ticks
// 0.01 apart start at 0.99; with the floor at 1, where reserved over live cannot go, they start at 1.
TEST(SvgChart, TheYAxisStopsAtItsFloor) {
  const std::vector<svg_point> points{{0.1, 1.001, "a"}, {0.2, 1.02, "b"}};
  svg_frame frame{"x", "y", 720, 300};
  EXPECT_NE(svg_scatter(points, frame).find(">0.99</text>"), std::string::npos);
  frame.y_floor = 1.0;
  const std::string floored = svg_scatter(points, frame);
  EXPECT_EQ(floored.find(">0.99</text>"), std::string::npos);
  EXPECT_NE(floored.find(">1</text>"), std::string::npos);
  EXPECT_NE(floored.find(">1.01</text>"), std::string::npos);
}

// Labels that would cover each other: the second (lower) point's label moves a line down, with a line back to
// its point; a label far from the others stays beside its point with none. A failed setting is red.
TEST(SvgChart, LabelsMoveOffEachOtherAndFailuresAreRed) {
  const std::vector<svg_point> points{
      {1.0, 1.0100, "defaults", true}, {1.0, 1.0099, "small_handle=16MiB"}, {3.0, 1.05, "far", false, true}};
  const std::string svg = svg_scatter(points, {"x", "y", 720, 300});
  std::size_t leaders = 0;
  for (auto at = svg.find(R"(stroke="#999999")"); at != std::string::npos; at = svg.find(R"(stroke="#999999")", at + 1))
    ++leaders;
  EXPECT_EQ(leaders, 1u) << svg;
  const auto y_of = [&](const std::string& label) {
    const auto end = svg.find(">" + label + "</text>");
    const auto y = svg.rfind(" y=\"", end);
    return std::stod(svg.substr(y + 4));
  };
  EXPECT_NEAR(y_of("small_handle=16MiB") - y_of("defaults"), 13.0, 0.2);  // one line down (and 0.01% lower)
  EXPECT_NE(svg.find(R"( fill="#b00020">far</text>)"), std::string::npos) << svg;
  EXPECT_NE(svg.find(R"(fill="white" stroke="#b00020")"), std::string::npos) << svg;
  // Settings that share a point: a line each, the second a tspan 13 px below the first.
  const std::string two = svg_scatter({{1.0, 1.01, "small_handle=2MiB\nsmall_handle=4MiB"}}, {"x", "y", 720, 300});
  EXPECT_NE(two.find(R"(>small_handle=2MiB<tspan x=")"), std::string::npos) << two;
  EXPECT_NE(two.find(R"(" dy="13">small_handle=4MiB</tspan></text>)"), std::string::npos) << two;
}

// Words left, numbers right: one column of words by default, two where asked (a trace and a policy).
TEST(TextTable, WordColumnsLeftNumberColumnsRight) {
  text_table one({"file", "events", "span"});
  one.add_row({"a.vram", "6", "0.000 s"});
  one.add_row({"bb.vram", "1234", "12.500 s"});
  EXPECT_EQ(one.str(),
            "file     events      span\n"
            "-------------------------\n"
            "a.vram        6   0.000 s\n"
            "bb.vram    1234  12.500 s\n");
  text_table two({"trace", "policy", "events"}, 2);
  two.add_row({"small", "vram", "6"});
  EXPECT_EQ(two.str(),
            "trace  policy  events\n"
            "---------------------\n"
            "small  vram         6\n");
}

TEST(SvgChart, NiceTicks) {
  EXPECT_EQ(nice_ticks(0, 10, 5), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(nice_ticks(0, 1, 4), (std::vector<double>{0, 0.5, 1}));  // step 0.25 rounds up to 0.5
  EXPECT_EQ(nice_ticks(3, 3), (std::vector<double>{3}));
}

}  // namespace
}  // namespace vram
