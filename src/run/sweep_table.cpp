// A sweep's goal table (W/sweep.md): at each size gamma's file beside every other scorer's best
// (--each-scorer) and the llama.cpp mix of that size, KLD on each report text, whether gamma's
// file is below all of them, and the paired differences that decide it where the files are
// close. The same table a results/ page would carry, from the run's own JSON.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "run/mixes.h"
#include "run/pipeline.h"

namespace fs = std::filesystem;

namespace gm::run {

namespace {

// j[key] by reference (an empty array when absent): the rows are pointed to, not copied.
const json& list(const json& j, const char* key) {
  static const json empty = json::array();
  return j.contains(key) ? j[key] : empty;
}

// A row's mean KLD on each report text, the report text first (NaN where it lacks one).
std::vector<double> klds(const json& row, size_t texts) {
  std::vector<double> out = {row.value("kld_mean", NAN)};
  if (row.contains("also"))
    for (const auto& a : row["also"]) out.push_back(a.value("kld_mean", NAN));
  out.resize(texts, NAN);
  return out;
}

std::string cell(const std::vector<double>& k) {
  std::string s;
  for (double v : k) s += (s.empty() ? "" : " / ") + (std::isnan(v) ? std::string("–") : fmt::format("{:.4f}", v));
  return s;
}

// The mix a size is judged against: the one the size names, else the fitting mix lowest on the
// report text; null when none fits.
const json* mix_of(const json& size) {
  const std::string named = "llama.cpp " + mix_size_name(size["target"]["size"].get<std::string>());
  const json* best = nullptr;
  for (const auto& m : list(size, "mixes")) {
    if (m["label"] == named) return &m;
    if (m.value("fits_budget", false) && (!best || m["kld_mean"].get<double>() < (*best)["kld_mean"].get<double>())) best = &m;
  }
  return best;
}

// gamma minus `row` on text i: "below" / "above" beyond two paired errors, else "tie"; without a
// paired figure, by the means.
std::string compare(const json& row, size_t i, double mine, double theirs) {
  if (row.contains("paired_gamma_minus") && i < row["paired_gamma_minus"].size()) {
    const json& p = row["paired_gamma_minus"][i];
    const double m = p["mean"].get<double>(), se = p["stderr"].get<double>();
    return m + 2 * se < 0 ? "below" : m - 2 * se > 0 ? "above" : "tie";
  }
  return mine < theirs ? "below" : "above";
}

std::string paired_cell(const json& row) {
  std::string s;
  for (const auto& p : list(row, "paired_gamma_minus"))
    s += (s.empty() ? "" : " / ") + fmt::format("{:+.4f} ± {:.4f}", p["mean"].get<double>(), p["stderr"].get<double>());
  return s.empty() ? "–" : s;
}

}  // namespace

std::string sweep_table_md(const json& sweep) {
  if (sweep["sizes"].empty()) return "";
  const json& first = sweep["sizes"][0];
  std::vector<std::string> texts = {fs::path(first["report"]["text"].get<std::string>()).filename().string()};
  for (const auto& a : list(first["report"], "also"))
    texts.push_back(fs::path(a.get<std::string>()).filename().string());
  // The other scorers' columns, in the order they first appear.
  std::vector<std::string> families;
  for (const auto& s : sweep["sizes"])
    for (const auto& b : list(s, "scorer_bests"))
      if (std::find(families.begin(), families.end(), b["scorer"].get<std::string>()) == families.end())
        families.push_back(b["scorer"].get<std::string>());
  bool speed = false;
  for (const auto& s : sweep["sizes"]) speed = speed || (s.contains("speed") && s["rows"][0].contains("tg128"));

  std::string md = "| size | gamma (chosen on validation) |";
  for (const auto& f : families) md += " best " + f + " |";
  md += std::string(" llama.cpp mix | gamma below all") +
        (texts.size() == 1 ? "?" : texts.size() == 2 ? " on both texts?" : " on every text?") + " |";
  if (speed) md += " decode budget | tg128 gamma / mix |";
  md += "\n|---|---|";
  for (size_t i = 0; i < families.size(); ++i) md += "---|";
  md += "---|---|" + std::string(speed ? "---|---|" : "") + "\n";
  std::string paired;
  for (const auto& s : sweep["sizes"]) {
    const json& g = s["rows"][0];
    const std::vector<double> mine = klds(g, texts.size());
    md += fmt::format("| {} | {} ({}, {} bytes) |", s["target"]["size"].get<std::string>(), cell(mine),
                      s["chosen"]["name"].get<std::string>(), g["file_bytes"].get<uint64_t>());
    std::vector<std::string> against;  // where gamma's file is not below, in words
    std::string prow = "| " + s["target"]["size"].get<std::string>() + " |";
    // One compared file: its KLD cell here, its paired cell in the second table.
    auto column = [&](const json* row, const std::string& name) {
      if (!row) {
        md += " – |";
        prow += " – |";
        return;
      }
      const std::vector<double> theirs = klds(*row, texts.size());
      for (size_t i = 0; i < texts.size(); ++i) {
        if (std::isnan(theirs[i]) || std::isnan(mine[i])) continue;
        const std::string c = compare(*row, i, mine[i], theirs[i]);
        if (c != "below") against.push_back(c + " " + name + " on " + texts[i]);
      }
      md += " " + cell(theirs) + (row->contains("scorer") ? "" : " (" + name + ")") + " |";
      prow += " " + paired_cell(*row) + " |";
    };
    for (const auto& f : families) {
      const json* best = nullptr;
      for (const auto& b : list(s, "scorer_bests"))
        if (b["scorer"] == f) best = &b;
      column(best, f);
    }
    const json* mix = mix_of(s);
    column(mix, mix ? (*mix)["label"].get<std::string>().substr(std::string("llama.cpp ").size()) : "");
    std::string verdict;
    for (const auto& a : against) verdict += (verdict.empty() ? "" : "; ") + a;
    md += " " + (verdict.empty() ? std::string("yes") : verdict) + " |";
    if (speed) {
      const auto tg = [](const json* r) {
        return r && r->contains("tg128") ? fmt::format("{:.2f}", (*r)["tg128"].get<double>()) : std::string("–");
      };
      md += s.contains("speed") ? fmt::format(" {:.2f} |", s["speed"]["min_decode_tps"].get<double>()) : std::string(" – |");
      md += " " + tg(&g) + " / " + tg(mix) + " |";
    }
    md += "\n";
    paired += prow + "\n";
  }
  std::string text_list;
  for (const auto& t : texts) text_list += (text_list.empty() ? "" : " / ") + t;
  md += fmt::format("\nKLD vs the teacher, {} ({} chunks of {} tokens each, the same chunks for every file).\n", text_list,
                    first["report"]["chunks"].get<int>(), first["report"]["ctx"].get<int>());
  md += "\ngamma's file minus each, paired on the same chunks (mean ± standard error, " + text_list +
        "; below / above: beyond two errors):\n\n| size |";
  for (const auto& f : families) md += " best " + f + " |";
  md += " llama.cpp mix |\n|---|";
  for (size_t i = 0; i <= families.size(); ++i) md += "---|";
  md += "\n" + paired;
  return md;
}

}  // namespace gm::run
