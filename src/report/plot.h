// The report's PNG charts, drawn with cairo: a line chart (series of x/y points), a heatmap of
// discrete categories (e.g. the chosen type per layer × module kind) and a heatmap of a
// square matrix (e.g. cosine similarity). Drawing happens in memory; write_png writes the
// file atomically, so a failed report leaves no partial image.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "util/status.h"

typedef struct _cairo_surface cairo_surface_t;

namespace gm::report {

// An in-memory ARGB image.
class Image {
 public:
  Image(int width, int height);
  ~Image();
  Image(Image&&) noexcept;
  Image& operator=(Image&&) noexcept;
  Image(const Image&) = delete;
  Image& operator=(const Image&) = delete;
  int width() const { return width_; }
  int height() const { return height_; }
  cairo_surface_t* surface() const { return surface_; }
  Status write_png(const std::string& path) const;  // atomic

 private:
  int width_ = 0, height_ = 0;
  cairo_surface_t* surface_ = nullptr;
};

// Images one above the other, as wide as the widest (the rest white): one PNG with panels.
Image stack_vertically(const std::vector<const Image*>& panels);

struct Rgb {
  double r = 0, g = 0, b = 0;
};
// Viridis, t in [0, 1].
Rgb viridis(double t);
// `n` distinct colours for ordered categories (dark/low to bright/high).
std::vector<Rgb> ordered_palette(size_t n);

struct Series {
  std::string name;
  std::vector<double> x, y;
  std::vector<double> y_err;            // optional: ± error bars, same length as y
  std::vector<std::string> point_labels;  // optional: a small label next to each point
  bool markers_only = false;              // points without a connecting line
};

struct LineChart {
  std::string title, x_label, y_label;
  bool log_y = false;
  std::vector<Series> series;
  // Optional horizontal reference line (e.g. r = 0).
  bool y_zero_line = false;
  // Optional vertical reference lines (e.g. a budget), dashed, with a label at the top.
  std::vector<std::pair<double, std::string>> x_lines;
};

// Fails when there is no finite point (or, with log_y, no positive y).
Result<Image> draw_line_chart(const LineChart& c, int width = 960, int height = 640);

struct CategoryHeatmap {
  std::string title, x_label, y_label;
  std::vector<std::string> x_labels;  // columns
  std::vector<std::string> y_labels;  // rows, drawn top to bottom
  std::vector<std::vector<int>> cells;  // [row][col]: index into categories, -1 = none
  std::vector<std::string> categories;  // legend entries in colour order
  std::vector<Rgb> colors;              // one per category
};
Result<Image> draw_category_heatmap(const CategoryHeatmap& h);

struct MatrixHeatmap {
  std::string title, colorbar_label;
  std::vector<std::string> labels;     // rows and columns
  std::vector<std::vector<double>> m;  // square
  double vmin = 0, vmax = 1;
  bool annotate = true;  // print the values in the cells when they are large enough
  int decimals = 3;
};
Result<Image> draw_matrix_heatmap(const MatrixHeatmap& h);

}  // namespace gm::report
