// Bad input to the compilemask tool: each case gets exit code 2 (usage) or 1 (diagnostics, bad
// parameters or files) and one message naming the flag or parameter and the rule. Nothing
// crashes.
#include "cli_runner.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cm::cli_test {
namespace {

struct BadInput {
  std::vector<std::string> args;
  int exit_code;
  std::vector<std::string> message_parts;  // each must appear in stderr
};

void expect_failure(const BadInput& c) {
  const CliResult r = run_cli(c.args);
  std::string command;
  for (const std::string& a : c.args) command += a + " ";
  EXPECT_EQ(r.exit_code, c.exit_code) << command << "\nstderr: " << r.err;
  for (const std::string& part : c.message_parts) {
    EXPECT_TRUE(contains(r.err, part)) << command << "\nmissing '" << part << "' in: " << r.err;
  }
  EXPECT_TRUE(r.out.empty() || c.exit_code != 2) << command << "\nstdout: " << r.out;
}

const std::string kSliding = example("sliding_window");
const std::string kDocs = example("doc_causal");

TEST(CliUsage, CommandsAndFlags) {
  const std::vector<BadInput> cases = {
      {{}, 2, {"usage: compilemask"}},
      {{"frobnicate"}, 2, {"unknown command 'frobnicate'"}},
      {{"check"}, 2, {"needs a FILE argument"}},
      {{"check", kSliding, "extra"}, 2, {"unexpected argument 'extra'"}},
      {{"compile", kSliding, "--bogus"}, 2, {"unknown option '--bogus'"}},
      {{"compile", kSliding, "-p", "W=4", "-n"}, 2, {"-n needs a value"}},
      {{"compile", kSliding, "-p", "W=4", "-n", "12x"}, 2, {"-n: expected an integer", "'12x'"}},
      {{"compile", kSliding, "-p", "W=4", "--nq", "-5", "--nk", "5"}, 2, {"--nq: expected"}},
      {{"compile", kSliding, "-p", "W=4", "-n", "99999999999"}, 2, {"-n: expected an integer"}},
      {{"compile", kSliding, "-p", "W=4", "-n", "8", "-n", "9"}, 2, {"-n is given more than once"}},
      {{"compile", kSliding, "-p", "W=4"}, 2, {"query length is not set"}},
      {{"compile", kSliding, "-p", "W=4", "--nq", "64"}, 2, {"key length is not set"}},
      {{"compile", kSliding, "-p", "W=4", "-n", "64", "--tile", "128"},
       2,
       {"--tile: expected MxN"}},
      {{"compile", kSliding, "-p", "W=4", "-n", "64", "--tile", "0x64"}, 2, {"--tile"}},
      {{"compile", kSliding, "-p", "W=4", "-n", "64", "--tile", "axb"}, 2, {"--tile"}},
      {{"compile", kSliding, "-p", "W", "-n", "64"}, 2, {"-p expects NAME=VALUE", "'W'"}},
      {{"compile", kSliding, "-p", "W=4", "-n", "64", "--emit", "yaml"}, 2, {"--emit", "'yaml'"}},
      {{"compile", kSliding, "-p", "W=4", "-n", "64", "--emit", "descriptor"}, 2, {"-o FILE"}},
      {{"compile", kSliding, "--dump-after=nope"}, 2, {"unknown pass 'nope'", "passes: "}},
      {{"show", kSliding, "-p", "W=4", "-n", "64", "--b", "2", "--batch", "2"},
       2,
       {"--b 2 must be less than --batch 2"}},
      {{"show", kSliding, "-p", "W=4", "-n", "64", "--max-width", "wide"}, 2, {"--max-width"}},
      {{"slices", kSliding, "-p", "W=4", "-n", "64", "--emit", "yaml"}, 2, {"--emit", "'yaml'"}},
      {{"compile", kSliding, "-p", "W=4", "-n", "64", "--cp", "1-4"},
       2,
       {"--cp: expected RANK/WORLD", "'1-4'"}},
      {{"show", kSliding, "-p", "W=4", "-n", "64", "--cp-contiguous"},
       2,
       {"--cp-contiguous applies only with --cp"}},
      {{"compile", kSliding, "-p", "W=4", "-n", "64", "--cp", "4/4"},
       1,
       {"0 <= rank < world_size", "world_size=4, rank=4"}},
      {{"compile", kSliding, "-p", "W=4", "-n", "60", "--cp", "1/4"},
       1,
       {"n = 60 must be a positive multiple of 8 (2 * world_size)"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--cp", "1/2", "--alibi"},
       2,
       {"--alibi needs a plan of every query row", "leave out --cp"}},
      {{"slices", kSliding, "-p", "W=4", "-n", "64", "--cp", "1/2"}, 2, {"unknown option '--cp'"}},
      {{"slices", kSliding, "-p", "W=4", "-n", "64", "--tile", "64x64"},
       2,
       {"unknown option '--tile'"}},
      {{"slices", kSliding, "-p", "W=4", "-n", "64", "--h", "1", "--heads", "1"},
       2,
       {"--h 1 must be less than --heads 1"}},
      {{"slices", kSliding, "-p", "W=0", "-n", "64"}, 1, {"W"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--heads", "3", "--heads-kv", "2"},
       2,
       {"--heads 3 must be a multiple of --heads-kv 2"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--backward=yes"}, 2, {"takes no value"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--softcap", "0"},
       2,
       {"--softcap: expected a finite number > 0, got '0'"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--softcap=-2"}, 2, {"got '-2'"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--softcap", "30x"}, 2, {"got '30x'"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--softcap", "inf"}, 2, {"got 'inf'"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--softcap", "1e999"}, 2, {"got '1e999'"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--dim", "0"}, 2, {"--dim: expected"}},
      {{"run", kSliding, "-p", "W=4", "--nq", "0", "--nk", "8"}, 2, {"lengths must be >= 1"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--dtype", "fp16"},
       2,
       {"--dtype applies only with --gpu"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--splits", "3"},
       2,
       {"--splits applies only with --gpu"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--gpu", "--splits", "257"},
       2,
       {"--splits: expected an integer in [0, 256], got '257'"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--heads", "2", "--heads-kv", "1", "--backward",
        "--head-splits", "2"},
       2,
       {"--head-splits applies only with --gpu"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--gpu", "--head-splits", "1"},
       2,
       {"--head-splits applies only with --backward"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--heads", "4", "--heads-kv", "2", "--gpu",
        "--backward", "--head-splits", "3"},
       2,
       {"--head-splits: expected an integer in [0, 2], got '3'"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--pages", "16"},
       2,
       {"--pages applies only with --gpu"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--gpu", "--pages", "48"},
       2,
       {"--pages must be 16, 32, 64 or a multiple of 128", "got 48"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--gpu", "--pages", "0"},
       2,
       {"--pages: expected an integer in [1, 2147483647], got '0'"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--gpu", "--pages", "16", "--backward"},
       2,
       {"--pages runs the forward only (paged K/V has no backward): leave out --backward"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--gpu", "--dtype", "fp32"},
       2,
       {"--dtype: expected bf16 or fp16, got 'fp32'"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--gpu", "--dim", "100"},
       2,
       {"--gpu supports --dim a multiple of 8 from 8 to 256", "got 100"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--gpu", "--dim", "264"},
       2,
       {"--gpu supports --dim a multiple of 8 from 8 to 256", "got 264"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--gpu", "--backward", "--dim", "264"},
       2,
       {"--gpu supports --dim a multiple of 8 from 8 to 256", "got 264"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--gpu", "--dim-v", "12"},
       2,
       {"--gpu supports --dim-v a multiple of 8 from 8 to 256", "got 12"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--dim-v", "0"},
       2,
       {"--dim-v: expected an integer in [1, 1024], got '0'"}},
      {{"run", kSliding, "-p", "W=4", "-n", "64", "--gpu", "--tile", "64x128"},
       2,
       {"--gpu needs --tile 128x128", "got 64x128"}},
  };
  for (const BadInput& c : cases) expect_failure(c);
}

TEST(CliErrors, FilesAndPrograms) {
  const std::string bad =
      write_scratch_file("bad.mask", "mask bad(W: int) {\n  q in all: k in [0, q + V]\n}\n");
  const std::string binary = write_scratch_file("binary.mask", std::string("\x7f\x00\xff\x01", 4));
  const std::vector<BadInput> cases = {
      {{"check", "/nonexistent/x.mask"}, 1, {"cannot read mask file '/nonexistent/x.mask'"}},
      {{"check", bad}, 1, {"bad.mask:2:", "^"}},
      {{"compile", bad, "-n", "64", "-p", "W=1"}, 1, {"bad.mask:2:"}},
      {{"check", binary}, 1, {"binary.mask:1:"}},
  };
  for (const BadInput& c : cases) expect_failure(c);
}

TEST(CliErrors, Parameters) {
  const std::vector<BadInput> cases = {
      {{"compile", kSliding, "-n", "64"}, 1, {"W"}},
      {{"compile", kSliding, "-n", "64", "-p", "W=4", "-p", "X=1"},
       1,
       {"parameter 'X' is not declared by mask sliding_window", "W: int"}},
      {{"compile", kSliding, "-n", "64", "-p", "W=four"}, 1, {"parameter 'W'", "'four'"}},
      {{"compile", kSliding, "-n", "64", "-p", "W=4", "-p", "W=5"},
       1,
       {"parameter 'W'", "more than once"}},
      {{"compile", kSliding, "-n", "64", "-p", "W=@/nonexistent/w.txt"},
       1,
       {"parameter 'W'", "cannot read value file"}},
      {{"compile", kDocs, "-n", "512", "-p", "docs=0:100,50:200"},
       1,
       {"parameter 'docs'", "sorted and non-overlapping"}},
      {{"compile", kDocs, "-n", "512", "-p", "docs=0,100,50"},
       1,
       {"parameter 'docs'", "must not decrease"}},
      {{"compile", kDocs, "-n", "512", "-p", "docs=len:100,-3"},
       1,
       {"parameter 'docs'", "lengths must be >= 0"}},
      {{"compile", kDocs, "-n", "512", "-p", "docs=10:5"},
       1,
       {"parameter 'docs'", "ends before it starts"}},
      {{"compile", kDocs, "-n", "512", "-p", "docs=0:1:2"}, 1, {"parameter 'docs'", "START:END"}},
      {{"compile", kDocs, "-n", "512", "-p", "docs=7"}, 1, {"parameter 'docs'", "at least two"}},
      {{"compile", example("shared_prefix"), "-n", "512", "-p", "prompt=0:10,10:20", "-p",
        "responses=20,512"},
       1,
       {"parameter 'prompt'", "one START:END pair"}},
      {{"compile", example("hstu"), "-n", "512", "-p", "seqs=0,512", "-p", "ctx=1,x", "-p",
        "targets=1"},
       1,
       {"parameter 'ctx'", "'x'"}},
      {{"compile", kSliding, "-n", "64", "-p", "W=4", "--tile", "8x8"}, 1, {"tile"}},
      {{"compile", kSliding, "-n", "64", "-p", "W=-1"},
       1,
       {"parameter 'W' must be >= 1, got -1 (declared 'W: int >= 1')"}},
      {{"compile", kSliding, "-n", "2147483647", "-p", "W=4"},
       1,
       {"16777216 x 16777216 tiles", "at most 65535 per axis"}},
      {{"compile", kSliding, "-n", "64", "-p", "W=4", "--batch", "70000", "--heads", "70000"},
       1,
       {"batch * heads must be at most 16777216, got 70000 * 70000"}},
  };
  for (const BadInput& c : cases) expect_failure(c);
}

}  // namespace
}  // namespace cm::cli_test
