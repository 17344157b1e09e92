// The compilemask tool on the bundled examples: every command succeeds, parameter syntaxes that
// mean the same segments give byte-identical descriptors, and outputs have their promised form.
#include "cli_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

namespace cm::cli_test {
namespace {

std::string describe(const CliResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout:\n" + r.out + "\n--- stderr:\n" +
         r.err;
}

CliResult expect_ok(const std::vector<std::string>& args) {
  CliResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  return r;
}

// The descriptor bytes for `mask` with the given -p arguments at n = 512.
std::string descriptor_bytes(const std::string& mask, const std::vector<std::string>& params) {
  const std::string out = scratch_dir() + "/descriptor.bin";
  std::vector<std::string> args = {"compile", example(mask), "-n", "512",
                                   "--emit",  "descriptor",  "-o", out};
  for (const std::string& p : params) args.insert(args.end(), {"-p", p});
  expect_ok(args);
  return read_file(out);
}

TEST(Cli, HelpListsCommandsAndOptions) {
  const CliResult top = expect_ok({"--help"});
  const CliResult unknown = run_cli({"nope"});
  EXPECT_EQ(unknown.exit_code, 2) << describe(unknown);
  for (const char* command :
       {"check", "compile", "inspect", "show", "slices", "run", "strip-order"}) {
    EXPECT_TRUE(contains(top.out, std::string("  ") + command + " ")) << describe(top);
    EXPECT_TRUE(contains(unknown.err, command)) << describe(unknown);
    const CliResult help = expect_ok({command, "--help"});
    EXPECT_TRUE(contains(help.out, std::string("usage: compilemask ") + command)) << help.out;
  }
  EXPECT_TRUE(contains(expect_ok({"compile", "--help"}).out, "--dump-after"));
  EXPECT_TRUE(contains(expect_ok({"run", "--help"}).out, "--backward"));
}

TEST(Cli, CheckAcceptsEveryExample) {
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(CM_SOURCE_DIR "/examples")) {
    if (entry.path().extension() != ".mask") continue;
    const CliResult r = expect_ok({"check", entry.path().string()});
    EXPECT_TRUE(contains(r.out, "ok: mask " + entry.path().stem().string() + "(")) << describe(r);
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

TEST(Cli, CheckPrintsTheSignature) {
  const CliResult r = expect_ok({"check", example("shared_prefix")});
  EXPECT_TRUE(contains(r.out, "ok: mask shared_prefix(prompt: segment, responses: segments)"))
      << describe(r);
  const CliResult bounded = expect_ok({"check", example("sinks_window")});
  EXPECT_TRUE(contains(bounded.out, "ok: mask sinks_window(S: int >= 0, W: int >= 1)"))
      << describe(bounded);
}

TEST(Cli, SegmentSyntaxesAgree) {
  const std::string boundaries = descriptor_bytes("doc_causal", {"docs=0,100,250,512"});
  ASSERT_GE(boundaries.size(), 4u);
  EXPECT_EQ(boundaries.substr(0, 4), "CMSK");
  EXPECT_EQ(descriptor_bytes("doc_causal", {"docs=len:100,150,262"}), boundaries);
  EXPECT_EQ(descriptor_bytes("doc_causal", {"docs=0:100,100:250,250:512"}), boundaries);
  const std::string file = write_scratch_file("docs.txt", "0 100\n250, 512\n");
  EXPECT_EQ(descriptor_bytes("doc_causal", {"docs=@" + file}), boundaries);
  // A gap between documents changes the mask.
  EXPECT_NE(descriptor_bytes("doc_causal", {"docs=0:100,120:250,250:512"}), boundaries);
}

TEST(Cli, SegmentAndArrayParameters) {
  EXPECT_EQ(descriptor_bytes("shared_prefix", {"prompt=0:128", "responses=128,300,512"}),
            descriptor_bytes("shared_prefix", {"prompt=0:128", "responses=128:300,300:512"}));
  const std::string inline_ctx =
      descriptor_bytes("hstu", {"seqs=0,200,512", "targets=5,5", "ctx=10,20"});
  const std::string values = write_scratch_file("ctx.txt", "10\n20\n");
  EXPECT_EQ(descriptor_bytes("hstu", {"seqs=0,200,512", "targets=5,5", "ctx=@" + values}),
            inline_ctx);
  EXPECT_NE(descriptor_bytes("hstu", {"seqs=0,200,512", "targets=5,5", "ctx=10,21"}), inline_ctx);
}

// The milliseconds printed after `label` in compile --estimate's text.
double estimate_ms(const std::string& out, const std::string& label) {
  const size_t at = out.find(label);
  EXPECT_NE(at, std::string::npos) << out;
  return at == std::string::npos ? 0.0 : std::stod(out.substr(at + label.size()));
}

TEST(Cli, CompileEstimatesTheKernelTimesFromTheTileCounts) {
  const auto clear = [](const std::string& strip, const std::string& heads) {
    return expect_ok({"compile", example("clear"), "-p", "text=64", "-p", "s=60", "-p", "r=8", "-p",
                      "strip=" + strip, "-n", "3664", "--heads", heads, "--estimate"})
        .out;
  };
  const std::string strips = clear("8", "1"), row_major = clear("60", "1");
  const double forward = estimate_ms(strips, "forward:");
  const double training = estimate_ms(strips, "forward + backward:");
  EXPECT_GT(forward, 0.0);
  EXPECT_GT(training, 2.5 * forward);  // the backward's halves cost more than the forward's tiles
  // Strips touch fewer tiles than rows of a 60-wide image, and every head is one more mask.
  EXPECT_LT(training, estimate_ms(row_major, "forward + backward:"));
  EXPECT_NEAR(estimate_ms(clear("8", "4"), "forward:"), 4 * forward, 0.003);  // %.3f ms each

  const CliResult json =
      expect_ok({"compile", example("causal"), "-n", "1000", "--estimate", "--emit", "json"});
  EXPECT_TRUE(contains(json.out, "\"estimate\": {\"forward_seconds\": "))
      << json.out.substr(0, 600);
  const CliResult descriptor =
      run_cli({"compile", example("causal"), "-n", "1000", "--estimate", "--emit", "descriptor",
               "-o", scratch_dir() + "/unused.bin"});
  EXPECT_EQ(descriptor.exit_code, 2) << describe(descriptor);
  EXPECT_TRUE(contains(descriptor.err, "--estimate")) << describe(descriptor);
}

TEST(Cli, InspectChecksADescriptorFileAndPrintsItsStats) {
  const std::vector<std::string> base = {"compile", example("doc_causal"),
                                         "-p",      "docs=0,100,250,512",
                                         "-n",      "512",
                                         "--heads", "3",
                                         "--tile",  "64x32"};
  const std::string file = scratch_dir() + "/doc_causal.desc";
  std::vector<std::string> write = base;
  write.insert(write.end(), {"--emit", "descriptor", "-o", file});
  expect_ok(write);

  const std::string built = expect_ok(base).out;
  const CliResult inspected = expect_ok({"inspect", file});
  EXPECT_TRUE(contains(inspected.out, "a valid descriptor (version ")) << describe(inspected);
  EXPECT_TRUE(contains(inspected.out, "for nq=512 nk=512, batch 1, heads 3, tiles 64x32"))
      << describe(inspected);
  // The stats read back are the builder's, but for the build time, which only the build has.
  const std::string stats = built.substr(0, built.find("build time:"));
  EXPECT_TRUE(contains(inspected.out, stats)) << describe(inspected) << "\nbuilt:\n" << built;
  EXPECT_FALSE(contains(inspected.out, "build time")) << describe(inspected);

  std::vector<std::string> json = base;
  json.insert(json.end(), {"--emit", "json"});
  const std::string built_json = expect_ok(json).out;
  const std::string inspected_json = expect_ok({"inspect", file, "--emit", "json"}).out;
  const auto descriptor_part = [](const std::string& text) {
    return text.substr(text.find("\"descriptor\": "));
  };
  EXPECT_EQ(descriptor_part(inspected_json), descriptor_part(built_json));

  std::string corrupt = read_file(file);
  corrupt[0] = 'X';
  const CliResult bad = run_cli({"inspect", write_scratch_file("corrupt.desc", corrupt)});
  EXPECT_EQ(bad.exit_code, 1) << describe(bad);
  EXPECT_TRUE(contains(bad.err, "corrupt.desc: descriptor verification: bad magic"))
      << describe(bad);
  const CliResult missing = run_cli({"inspect", scratch_dir() + "/absent.desc"});
  EXPECT_EQ(missing.exit_code, 1) << describe(missing);
  EXPECT_TRUE(contains(missing.err, "cannot read descriptor file")) << describe(missing);
  const CliResult usage = run_cli({"inspect", file, "--emit", "descriptor"});
  EXPECT_EQ(usage.exit_code, 2) << describe(usage);
}

// The strip order stated plainly: tokens before and after the grid keep their places; inside
// it, frame by frame, strip by strip (the last one narrower), row by row.
std::string plain_strip_order(int start, int frames, int rows, int cols, int strip, int total) {
  std::string text;
  auto put = [&](int token) { text += std::to_string(token) + "\n"; };
  for (int t = 0; t < start; ++t) put(t);
  for (int f = 0; f < frames; ++f) {
    for (int c0 = 0; c0 < cols; c0 += strip) {
      for (int r = 0; r < rows; ++r) {
        for (int c = c0; c < std::min(cols, c0 + strip); ++c)
          put(start + (f * rows + r) * cols + c);
      }
    }
  }
  for (int t = start + frames * rows * cols; t < total; ++t) put(t);
  return text;
}

TEST(Cli, StripOrderPrintsThePermutation) {
  const CliResult order = expect_ok({"strip-order", "--start", "3", "--frames", "2", "--rows", "4",
                                     "--cols", "7", "--strip", "3", "--total", "64"});
  EXPECT_EQ(order.out, plain_strip_order(3, 2, 4, 7, 3, 64));
  const std::string file = scratch_dir() + "/order.txt";
  expect_ok(
      {"strip-order", "--rows", "5", "--cols", "5", "--strip", "2", "--total", "25", "-o", file});
  EXPECT_EQ(read_file(file), plain_strip_order(0, 1, 5, 5, 2, 25));

  const CliResult too_small =
      run_cli({"strip-order", "--rows", "4", "--cols", "4", "--strip", "2", "--total", "15"});
  EXPECT_EQ(too_small.exit_code, 1) << describe(too_small);
  EXPECT_TRUE(contains(too_small.err, "does not fit in 15 tokens")) << describe(too_small);
  const CliResult missing = run_cli({"strip-order", "--rows", "4", "--cols", "4", "--total", "16"});
  EXPECT_EQ(missing.exit_code, 2) << describe(missing);
  EXPECT_TRUE(contains(missing.err, "needs --strip")) << describe(missing);
  const CliResult zero =
      run_cli({"strip-order", "--rows", "0", "--cols", "4", "--strip", "2", "--total", "16"});
  EXPECT_EQ(zero.exit_code, 2) << describe(zero);
  EXPECT_TRUE(contains(zero.err, "--rows: expected an integer in [1,")) << describe(zero);
}

TEST(Cli, CompileEmitsStatsAndJson) {
  const std::vector<std::string> base = {
      "compile", example("sliding_window"), "-p", "W=100", "--nq", "1000", "--nk", "1200", "--tile",
      "64x128"};
  const CliResult stats = expect_ok(base);
  EXPECT_FALSE(stats.out.empty());
  std::vector<std::string> json_args = base;
  json_args.insert(json_args.end(), {"--emit", "json"});
  const CliResult json = expect_ok(json_args);
  EXPECT_EQ(json.out.front(), '{');
  EXPECT_TRUE(contains(json.out, "\"stats\"")) << json.out.substr(0, 400);
  EXPECT_TRUE(contains(json.out, "\"descriptor\"")) << json.out.substr(0, 400);
  const std::string path = scratch_dir() + "/stats.json";
  json_args.insert(json_args.end(), {"-o", path});
  expect_ok(json_args);
  // Everything but the build time is reproducible.
  const std::string written = read_file(path);
  const std::string tail = "\"descriptor\"";
  ASSERT_TRUE(contains(written, tail)) << written.substr(0, 400);
  EXPECT_EQ(written.substr(written.find(tail)), json.out.substr(json.out.find(tail)));
}

TEST(Cli, DumpAfterEveryPass) {
  // The usage error for an unknown pass lists the valid ones.
  const CliResult listing = run_cli({"compile", example("causal"), "--dump-after=nope"});
  ASSERT_EQ(listing.exit_code, 2) << describe(listing);
  const size_t at = listing.err.find("passes: ");
  ASSERT_NE(at, std::string::npos) << listing.err;
  std::istringstream names(listing.err.substr(at + 8, listing.err.find(')', at) - at - 8));
  std::string pass;
  int dumped = 0;
  while (std::getline(names, pass, ',')) {
    pass.erase(0, pass.find_first_not_of(' '));
    const CliResult r = expect_ok({"compile", example("clear"), "--dump-after", pass});
    EXPECT_FALSE(r.out.empty()) << pass;
    ++dumped;
  }
  EXPECT_GE(dumped, 1);
}

TEST(Cli, ShowDrawsFramedTileMap) {
  const CliResult r = expect_ok({"show", example("causal"), "-n", "1024"});
  EXPECT_TRUE(contains(r.out, "┌")) << r.out;
  EXPECT_TRUE(contains(r.out, "└")) << r.out;
  EXPECT_TRUE(contains(r.out, "██")) << r.out;
  EXPECT_TRUE(contains(r.out, "░░")) << r.out;
  EXPECT_TRUE(contains(r.out, "tiles: 28 full, 8 partial, 28 empty")) << r.out;
  // 1024 / 128 = 8 rows of tiles between the frame lines.
  int rows = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) rows += line.rfind("│", 0) == 0 ? 1 : 0;
  EXPECT_EQ(rows, 8);
}

TEST(Cli, ShowMergesTilesForNarrowTerminals) {
  const CliResult r = expect_ok({"show", example("causal"), "-n", "32768", "--max-width", "66"});
  EXPECT_TRUE(contains(r.out, "one cell = 8x8 tiles")) << r.out;
}

TEST(Cli, ShowSelectsBatchAndHead) {
  const CliResult narrow = expect_ok(
      {"show", example("per_head_window"), "-n", "512", "-p", "windows=16,512", "--h", "0"});
  const CliResult wide = expect_ok(
      {"show", example("per_head_window"), "-n", "512", "-p", "windows=16,512", "--h", "1"});
  EXPECT_TRUE(contains(wide.out, "(b=0, h=1)")) << wide.out;
  EXPECT_NE(narrow.out, wide.out);
}

// Sliding window W = 100: rows [0, 100) see [0, q] (causal), later rows (q - 100, q] (both
// ends move). The pair-by-pair check of every example's slices is in agreement.cpp.
TEST(Cli, SlicesPrintTheCoverAsTextAndJson) {
  const std::vector<std::string> sliding = {"slices", example("sliding_window"), "-n", "1000", "-p",
                                            "W=100"};
  const CliResult text = expect_ok(sliding);
  EXPECT_TRUE(contains(text.out,
                       "(b=0, h=0): nq=1000 nk=1000, 2 slices\n"
                       "q [0, 100) k [0, 100) causal\n"
                       "q [100, 1000) k [1, 1000) bi-causal\n"))
      << text.out;
  const std::string json = scratch_dir() + "/slices.json";
  std::vector<std::string> to_file = sliding;
  to_file.insert(to_file.end(), {"--emit", "json", "-o", json});
  EXPECT_EQ(expect_ok(to_file).out, "");
  EXPECT_EQ(read_file(json),
            "{\"q_ranges\": [[0, 100], [100, 1000]],\n \"k_ranges\": [[0, 100], [1, 1000]],\n"
            " \"attn_type_map\": [1, 3]}\n");
  const CliResult wide = expect_ok(
      {"slices", example("per_head_window"), "-n", "512", "-p", "windows=16,512", "--h", "1"});
  EXPECT_TRUE(contains(wide.out, "(b=0, h=1)")) << wide.out;
  EXPECT_TRUE(contains(wide.out, "1 slice\nq [0, 512) k [0, 512) causal\n")) << wide.out;
}

TEST(Cli, ShowWritesPng) {
  const std::string png = scratch_dir() + "/mask.png";
  const CliResult r = expect_ok({"show", example("clear"), "-p", "text=64", "-p", "s=24", "-p",
                                 "r=5", "-p", "strip=8", "-n", "640", "--png", png});
  EXPECT_TRUE(contains(r.out, "wrote " + png)) << r.out;
  const std::string bytes = read_file(png);
  ASSERT_GE(bytes.size(), 8u);
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
}

// The number following ` label ` on the first line of `text` that starts with `line_start`.
double value_after(const std::string& text, const std::string& label,
                   const std::string& line_start = "  max abs error vs float64:") {
  const size_t line = text.find(line_start);
  const size_t at = line == std::string::npos ? line : text.find(" " + label + " ", line);
  EXPECT_NE(at, std::string::npos) << label << " missing in:\n" << text;
  return at == std::string::npos ? 1e9 : std::strtod(text.c_str() + at + label.size() + 2, nullptr);
}

TEST(Cli, RunReportsSmallFloat32Errors) {
  const CliResult r = expect_ok({"run", example("doc_causal"), "-n", "300", "-p",
                                 "docs=0,1,140,300", "--heads", "4", "--heads-kv", "2", "--dim",
                                 "32", "--backward", "--threads", "2", "--tile", "64x64"});
  for (const char* label : {"O", "LSE", "dQ", "dK", "dV"}) {
    const double error = value_after(r.out, label);
    EXPECT_LT(error, 1e-3) << label << "\n" << r.out;
    EXPECT_GE(error, 0.0) << label;
  }
  EXPECT_TRUE(contains(r.out, "float64 reference")) << r.out;
  EXPECT_TRUE(contains(r.out, "backward")) << r.out;
}

// --softcap reaches both references: float32 against float64 stays close with the cap, and the
// header names it.
TEST(Cli, RunTakesALogitCap) {
  const CliResult r = expect_ok({"run", example("causal"), "-n", "200", "--dim", "32", "--backward",
                                 "--threads", "2", "--softcap", "0.25"});
  EXPECT_TRUE(contains(r.out, ", softcap 0.25\n")) << r.out;
  for (const char* label : {"O", "LSE", "dQ", "dK", "dV"}) {
    EXPECT_LT(value_after(r.out, label), 1e-3) << label << "\n" << r.out;
  }
}

// --sinks reaches both references and the backward reports the sinks' gradient; rows 180 on
// lie in no document and see no key, so their LSE is the sink.
TEST(Cli, RunTakesAttentionSinks) {
  const CliResult r =
      expect_ok({"run", example("doc_causal"), "-p", "docs=0,70,130,180", "-n", "200", "--heads",
                 "4", "--heads-kv", "2", "--dim", "32", "--backward", "--threads", "2", "--sinks"});
  EXPECT_TRUE(contains(r.out, ", attention sinks\n")) << r.out;
  for (const char* label : {"O", "LSE", "dQ", "dK", "dV", "dsinks"}) {
    EXPECT_LT(value_after(r.out, label), 1e-3) << label << "\n" << r.out;
  }
}

// --alibi reaches both references, with nq != nk (the last row aligned with the last key) and
// the sinks; the header names it.
TEST(Cli, RunTakesAlibi) {
  const CliResult r =
      expect_ok({"run", example("causal"), "--nq", "150", "--nk", "200", "--heads", "4", "--dim",
                 "32", "--backward", "--threads", "2", "--alibi", "--sinks"});
  EXPECT_TRUE(contains(r.out, ", attention sinks, ALiBi\n")) << r.out;
  for (const char* label : {"O", "LSE", "dQ", "dK", "dV", "dsinks"}) {
    EXPECT_LT(value_after(r.out, label), 1e-3) << label << "\n" << r.out;
  }
}

// --cp plans a context-parallel rank's query rows against all keys: causal's rank 1 of 4 holds
// rows [128, 256) and [768, 896) of 1024 (balanced) or [256, 512) (contiguous), where row q
// sees q + 1 keys; show draws the rank's rows and run attends with them.
TEST(Cli, CompileShowAndRunTakeAContextParallelRank) {
  auto visible = [](double first, double end) { return (first + 1 + end) * (end - first) / 2; };
  std::vector<std::string> args = {"compile", example("causal"), "-n", "1024", "--cp", "1/4"};
  EXPECT_EQ(value_after(expect_ok(args).out, "pairs:", "visible pairs:"),
            visible(128, 256) + visible(768, 896));
  args.push_back("--cp-contiguous");
  EXPECT_EQ(value_after(expect_ok(args).out, "pairs:", "visible pairs:"), visible(256, 512));
  const CliResult shown = expect_ok({"show", example("causal"), "-n", "1024", "--cp", "0/2"});
  EXPECT_TRUE(contains(shown.out, "nq=512 nk=1024")) << shown.out;
  const CliResult r = expect_ok({"run", example("causal"), "-n", "1024", "--cp", "3/4", "--heads",
                                 "2", "--dim", "32", "--backward", "--threads", "2"});
  EXPECT_TRUE(contains(r.out, "nq 256, nk 1024")) << r.out;
  EXPECT_TRUE(contains(r.out, ", context-parallel rank 3/4\n")) << r.out;
  for (const char* label : {"O", "LSE", "dQ", "dK", "dV"}) {
    EXPECT_LT(value_after(r.out, label), 1e-3) << label << "\n" << r.out;
  }
}

// --dim-v gives V and O their own head dim (MLA): both references take it, and the header
// names it.
TEST(Cli, RunTakesAValueHeadDim) {
  const CliResult r = expect_ok({"run", example("doc_causal"), "-p", "docs=0,70,130,180", "-n",
                                 "200", "--heads", "4", "--heads-kv", "2", "--dim", "32", "--dim-v",
                                 "24", "--backward", "--threads", "2"});
  EXPECT_TRUE(contains(r.out, "dim 32 (v 24), tiles")) << r.out;
  for (const char* label : {"O", "LSE", "dQ", "dK", "dV"}) {
    EXPECT_LT(value_after(r.out, label), 1e-3) << label << "\n" << r.out;
  }
}

// Effective TFLOP/s count 2 (D + Dv) flops per visible pair: causal has n (n + 1) / 2 per (b, h).
TEST(Cli, RunReportsEffectiveThroughput) {
  const int n = 512, dim = 64, dim_v = 40, batch = 2, heads = 3;
  const CliResult r =
      expect_ok({"run", example("causal"), "-n", std::to_string(n), "--dim", std::to_string(dim),
                 "--dim-v", std::to_string(dim_v), "--batch", std::to_string(batch), "--heads",
                 std::to_string(heads), "--threads", "2"});
  const double flops = 2.0 * (dim + dim_v) * batch * heads * n * (n + 1) / 2;
  const size_t line = r.out.find("float64 reference");
  ASSERT_NE(line, std::string::npos) << r.out;
  double time = 0, tflops = 0;
  char unit[3] = {};
  ASSERT_EQ(std::sscanf(r.out.c_str() + line, "float64 reference forward %lf %2s (%lf TFLOP/s)",
                        &time, unit, &tflops),
            3)
      << r.out;
  const double seconds = std::string(unit) == "ms" ? time * 1e-3 : time;
  ASSERT_GT(seconds, 0) << r.out;
  // The printed figures have 3 decimals and 3 significant digits.
  EXPECT_NEAR(tflops * 1e12 * seconds / flops, 1.0, 0.02) << r.out;
}

#if CM_CLI_GPU_BUILD
// A Hopper machine's `run --gpu` output: each error within 16x the cost of rounding the exact
// result to bf16 (the kernel rounds P, dS and its outputs once each), plus a small atol; the
// gradients' errors where the run has a backward.
void expect_gpu_errors_near_rounding(const CliResult& r) {
  const bool backward = contains(r.out, "dQ");
  for (const char* label : {"O", "dQ", "dK", "dV"}) {
    if (!backward && std::string(label) != "O") continue;
    const double floor = value_after(r.out, label, "  rounding the float64 results");
    EXPECT_LE(value_after(r.out, label), 16 * floor + 1e-3) << label << "\n" << r.out;
  }
  EXPECT_LE(value_after(r.out, "LSE"), 1e-2) << r.out;
  EXPECT_TRUE(contains(r.out, "TFLOP/s")) << r.out;
}
#endif

// `run --gpu` runs the sm90 kernels where a Hopper GPU and a CUDA build exist; anywhere else it
// fails with exit code 1 and says why, before printing anything.
TEST(Cli, RunOnGpuOrExplainsWhyNot) {
  const CliResult r =
      run_cli({"run", example("causal"), "-n", "300", "--heads", "2", "--backward", "--gpu"});
#if CM_CLI_GPU_BUILD
  if (r.exit_code == 0) {
    expect_gpu_errors_near_rounding(r);
    // With a cap that bends these logits (their deviation is about 0.33): the kernels' cap
    // against the reference's.
    expect_gpu_errors_near_rounding(expect_ok({"run", example("causal"), "-n", "300", "--heads",
                                               "2", "--backward", "--gpu", "--softcap", "0.3"}));
    // Attention sinks, in the epilogue and in the combine kernel of five key parts.
    for (const char* splits : {"1", "5"}) {
      const CliResult sinks =
          expect_ok({"run", example("causal"), "--nq", "100", "--nk", "3000", "--heads", "4",
                     "--heads-kv", "2", "--backward", "--gpu", "--sinks", "--splits", splits});
      expect_gpu_errors_near_rounding(sinks);
      EXPECT_LE(value_after(sinks.out, "dsinks"), 1e-2) << sinks.out;
    }
    // ALiBi with 100 rows against 3000 keys (the offset nk - nq), keys whole and in five parts.
    for (const char* splits : {"1", "5"}) {
      expect_gpu_errors_near_rounding(
          expect_ok({"run", example("causal"), "--nq", "100", "--nk", "3000", "--heads", "4",
                     "--heads-kv", "2", "--backward", "--gpu", "--alibi", "--splits", splits}));
    }
    // MLA's head dims (the kernels for 256), keys whole and in five parts; and in pages.
    for (const char* splits : {"1", "5"}) {
      expect_gpu_errors_near_rounding(expect_ok(
          {"run", example("causal"), "--nq", "100", "--nk", "3000", "--heads", "4", "--heads-kv",
           "2", "--dim", "192", "--dim-v", "128", "--backward", "--gpu", "--splits", splits}));
    }
    expect_gpu_errors_near_rounding(
        expect_ok({"run", example("causal"), "--nq", "16", "--nk", "3000", "--heads", "8",
                   "--heads-kv", "2", "--dim", "192", "--dim-v", "128", "--gpu", "--pages", "64"}));
    // Few query rows against many keys, the keys in five parts merged by their LSEs.
    const CliResult split_keys =
        expect_ok({"run", example("causal"), "--nq", "16", "--nk", "3000", "--heads", "2",
                   "--backward", "--gpu", "--splits", "5"});
    EXPECT_TRUE(contains(split_keys.out, "[key splits 5, head splits 1]")) << split_keys.out;
    expect_gpu_errors_near_rounding(split_keys);
    // The kv group's four query heads over three CTAs per key tile (parts of 1, 1 and 2 heads).
    const CliResult split_heads =
        expect_ok({"run", example("causal"), "-n", "300", "--heads", "4", "--heads-kv", "1",
                   "--backward", "--gpu", "--head-splits", "3"});
    EXPECT_TRUE(contains(split_heads.out, ", head splits 3]")) << split_heads.out;
    expect_gpu_errors_near_rounding(split_heads);
    // K and V in a shuffled pool of 16-row pages, NaN in every slot without a key.
    const CliResult paged =
        expect_ok({"run", example("causal"), "--nq", "16", "--nk", "3000", "--heads", "8",
                   "--heads-kv", "2", "--dim", "128", "--gpu", "--pages", "16"});
    EXPECT_TRUE(contains(paged.out, "K/V in pages of 16 rows")) << paged.out;
    expect_gpu_errors_near_rounding(paged);
    return;
  }
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_TRUE(contains(r.err, "no CUDA device: ") || contains(r.err, "compute capability 9.0"))
      << describe(r);
#else
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_TRUE(contains(r.err, "this build has no GPU support (nvcc not found at configure time)"))
      << describe(r);
#endif
  EXPECT_TRUE(r.out.empty()) << describe(r);
}

TEST(Cli, RunDrawsProgressWhenAsked) {
  const CliResult quiet = expect_ok({"run", example("causal"), "-n", "256"});
  EXPECT_FALSE(contains(quiet.err, "100%")) << quiet.err;
  const CliResult bar = expect_ok({"run", example("causal"), "-n", "256", "--progress"});
  EXPECT_TRUE(contains(bar.err, "100%")) << bar.err;
  EXPECT_TRUE(contains(bar.err, "float32 reference forward")) << bar.err;
}

}  // namespace
}  // namespace cm::cli_test
