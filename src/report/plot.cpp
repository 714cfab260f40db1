#include "report/plot.h"

#include <algorithm>
#include <cmath>

#include <cairo.h>

#include "util/files.h"

namespace gm::report {

Image::Image(int width, int height)
    : width_(width), height_(height), surface_(cairo_image_surface_create(CAIRO_FORMAT_ARGB32, width, height)) {}
Image::~Image() {
  if (surface_) cairo_surface_destroy(surface_);
}
Image::Image(Image&& o) noexcept : width_(o.width_), height_(o.height_), surface_(o.surface_) { o.surface_ = nullptr; }
Image& Image::operator=(Image&& o) noexcept {
  if (this != &o) {
    if (surface_) cairo_surface_destroy(surface_);
    width_ = o.width_, height_ = o.height_, surface_ = o.surface_;
    o.surface_ = nullptr;
  }
  return *this;
}

Image stack_vertically(const std::vector<const Image*>& panels) {
  int w = 0, h = 0;
  for (const Image* p : panels) w = std::max(w, p->width()), h += p->height();
  Image out(w, h);
  cairo_t* cr = cairo_create(out.surface());
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  int y = 0;
  for (const Image* p : panels) {
    cairo_set_source_surface(cr, p->surface(), 0, y);
    cairo_paint(cr);
    y += p->height();
  }
  cairo_destroy(cr);
  cairo_surface_flush(out.surface());
  return out;
}

Status Image::write_png(const std::string& path) const {
  if (!surface_ || cairo_surface_status(surface_) != CAIRO_STATUS_SUCCESS)
    return Status::errorf("{}: the image could not be drawn", path);
  return write_atomic(path, [&](const std::string& tmp) {
    cairo_status_t st = cairo_surface_write_to_png(surface_, tmp.c_str());
    if (st != CAIRO_STATUS_SUCCESS) return Status::errorf("writing {}: {}", path, cairo_status_to_string(st));
    return Status::ok();
  });
}

Rgb viridis(double t) {
  // Viridis at 9 anchors, linearly interpolated.
  static const double a[9][3] = {{0.267, 0.005, 0.329}, {0.283, 0.141, 0.458}, {0.254, 0.265, 0.530},
                                 {0.207, 0.372, 0.553}, {0.164, 0.471, 0.558}, {0.128, 0.567, 0.551},
                                 {0.135, 0.659, 0.518}, {0.477, 0.821, 0.318}, {0.993, 0.906, 0.144}};
  if (!std::isfinite(t)) t = 0;
  t = std::clamp(t, 0.0, 1.0) * 8;
  int i = std::min(int(t), 7);
  double f = t - i;
  return {a[i][0] + f * (a[i + 1][0] - a[i][0]), a[i][1] + f * (a[i + 1][1] - a[i][1]),
          a[i][2] + f * (a[i + 1][2] - a[i][2])};
}

std::vector<Rgb> ordered_palette(size_t n) {
  // Up to 10 categories: hand-picked steps from dark red (few bits) through orange, yellow
  // and greens to blue/purple (many bits), distinguishable side by side; more: viridis.
  static const Rgb fixed[10] = {{0.55, 0.05, 0.10}, {0.85, 0.20, 0.15}, {0.96, 0.50, 0.20}, {0.99, 0.78, 0.30},
                                {0.85, 0.92, 0.45}, {0.55, 0.80, 0.45}, {0.20, 0.62, 0.45}, {0.20, 0.50, 0.75},
                                {0.30, 0.25, 0.65}, {0.45, 0.10, 0.45}};
  std::vector<Rgb> out;
  if (n <= 10) {
    // Spread n picks over the 10 steps so few categories still contrast.
    for (size_t i = 0; i < n; ++i) out.push_back(fixed[n == 1 ? 3 : size_t(std::lround(i * 9.0 / double(n - 1)))]);
  } else {
    for (size_t i = 0; i < n; ++i) out.push_back(viridis(double(i) / double(n - 1)));
  }
  return out;
}

namespace {

// Qualitative colours for series (matplotlib's tab10).
const Rgb kSeries[10] = {{0.122, 0.467, 0.706}, {1.000, 0.498, 0.055}, {0.173, 0.627, 0.173}, {0.839, 0.153, 0.157},
                         {0.580, 0.404, 0.741}, {0.549, 0.337, 0.294}, {0.890, 0.467, 0.761}, {0.498, 0.498, 0.498},
                         {0.737, 0.741, 0.133}, {0.090, 0.745, 0.812}};

class Pen {
 public:
  explicit Pen(const Image& img) : cr_(cairo_create(img.surface())) {
    cairo_set_source_rgb(cr_, 1, 1, 1);
    cairo_paint(cr_);
    font(12);
  }
  ~Pen() { cairo_destroy(cr_); }
  cairo_t* cr() const { return cr_; }
  void font(double size, bool bold = false) {
    cairo_select_font_face(cr_, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr_, size);
  }
  void color(const Rgb& c, double a = 1) { cairo_set_source_rgba(cr_, c.r, c.g, c.b, a); }
  void color(double r, double g, double b, double a = 1) { cairo_set_source_rgba(cr_, r, g, b, a); }
  double text_width(const std::string& s) const {
    cairo_text_extents_t e;
    cairo_text_extents(cr_, s.c_str(), &e);
    return e.x_advance;
  }
  // Text anchored at (x, y): ax 0/0.5/1 = left/centre/right, ay 0/0.5/1 = top/middle/baseline.
  void text(double x, double y, const std::string& s, double ax = 0, double ay = 1, double angle = 0) {
    cairo_font_extents_t fe;
    cairo_font_extents(cr_, &fe);
    const double w = text_width(s);
    cairo_save(cr_);
    cairo_translate(cr_, x, y);
    cairo_rotate(cr_, angle);
    const double cap = fe.ascent * 0.75;  // visual height of digits/capitals
    cairo_move_to(cr_, -ax * w, ay >= 1 ? 0 : (ay <= 0 ? cap : cap / 2));
    cairo_show_text(cr_, s.c_str());
    cairo_restore(cr_);
  }
  void line(double x0, double y0, double x1, double y1, double width) {
    cairo_set_line_width(cr_, width);
    cairo_move_to(cr_, x0, y0);
    cairo_line_to(cr_, x1, y1);
    cairo_stroke(cr_);
  }
  void rect(double x, double y, double w, double h) {
    cairo_rectangle(cr_, x, y, w, h);
    cairo_fill(cr_);
  }
  void marker(int shape, double x, double y, double r) {
    cairo_new_path(cr_);
    switch (shape % 5) {
      case 0: cairo_arc(cr_, x, y, r, 0, 2 * M_PI); break;
      case 1: cairo_rectangle(cr_, x - r * 0.85, y - r * 0.85, 1.7 * r, 1.7 * r); break;
      case 2:
        cairo_move_to(cr_, x, y - 1.2 * r), cairo_line_to(cr_, x + 1.1 * r, y + 0.8 * r);
        cairo_line_to(cr_, x - 1.1 * r, y + 0.8 * r), cairo_close_path(cr_);
        break;
      case 3:
        cairo_move_to(cr_, x, y - 1.25 * r), cairo_line_to(cr_, x + 1.1 * r, y);
        cairo_line_to(cr_, x, y + 1.25 * r), cairo_line_to(cr_, x - 1.1 * r, y), cairo_close_path(cr_);
        break;
      default:
        cairo_move_to(cr_, x, y + 1.2 * r), cairo_line_to(cr_, x + 1.1 * r, y - 0.8 * r);
        cairo_line_to(cr_, x - 1.1 * r, y - 0.8 * r), cairo_close_path(cr_);
    }
    cairo_fill_preserve(cr_);
    cairo_set_source_rgb(cr_, 1, 1, 1);
    cairo_set_line_width(cr_, 1);
    cairo_stroke(cr_);
  }

 private:
  cairo_t* cr_;
};

std::string fmt_tick(double v, double step) {
  if (std::fabs(v) < step * 1e-9) v = 0;
  int dec = step >= 1 ? 0 : int(std::ceil(-std::log10(step) - 1e-9));
  if (std::fabs(v) >= 1e5 || (v != 0 && std::fabs(v) < 1e-4)) return fmt::format("{:.2g}", v);
  return fmt::format("{:.{}f}", v, std::min(dec, 6));
}

// Ticks at 1, 2, 5 × 10^k covering [lo, hi] with about `want` steps.
std::vector<double> nice_ticks(double lo, double hi, int want, double* step_out) {
  double span = hi - lo;
  if (!(span > 0)) span = std::fabs(lo) > 0 ? std::fabs(lo) : 1;
  const double raw = span / want, mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) t.push_back(v);
  *step_out = step;
  return t;
}

}  // namespace

Result<Image> draw_line_chart(const LineChart& c, int width, int height) {
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  auto ok_y = [&](double y) { return std::isfinite(y) && (!c.log_y || y > 0); };
  for (const auto& s : c.series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !ok_y(s.y[i])) continue;
      const double e = i < s.y_err.size() && std::isfinite(s.y_err[i]) ? s.y_err[i] : 0;
      xmin = std::min(xmin, s.x[i]), xmax = std::max(xmax, s.x[i]);
      ymin = std::min(ymin, ok_y(s.y[i] - e) ? s.y[i] - e : s.y[i]), ymax = std::max(ymax, s.y[i] + e);
    }
  if (!(xmin <= xmax)) return Status::errorf("chart '{}': no point to draw", c.title);
  for (const auto& xl : c.x_lines)
    if (std::isfinite(xl.first)) xmin = std::min(xmin, xl.first), xmax = std::max(xmax, xl.first);
  auto ty = [&](double y) { return c.log_y ? std::log10(y) : y; };
  double lo = ty(ymin), hi = ty(ymax);
  if (c.y_zero_line && !c.log_y) lo = std::min(lo, 0.0), hi = std::max(hi, 0.0);
  double xpad = (xmax - xmin) * 0.06, ypad = (hi - lo) * 0.08;
  if (xpad == 0) xpad = std::max(std::fabs(xmin) * 0.05, 0.5);
  // Points a few bytes apart on a 750 MB axis: show them as the near-equal sizes they are.
  xpad = std::max(xpad, (std::fabs(xmin) + std::fabs(xmax)) * 0.0025);
  if (ypad == 0) ypad = c.log_y ? 0.5 : std::max(std::fabs(lo) * 0.1, 0.05);
  const double x0v = xmin - xpad, x1v = xmax + xpad, y0v = lo - ypad, y1v = hi + ypad;

  Image img(width, height);
  Pen p(img);
  // Legend width decides the right margin.
  p.font(12);
  double legend_w = 0;
  for (const auto& s : c.series) legend_w = std::max(legend_w, p.text_width(s.name));
  const double L = 90, T = 50, B = 70, R = std::min(40 + legend_w + 40, width * 0.35);
  const double pw = width - L - R, ph = height - T - B;
  auto X = [&](double x) { return L + (x - x0v) / (x1v - x0v) * pw; };
  auto Y = [&](double y) { return T + ph - (ty(y) - y0v) / (y1v - y0v) * ph; };

  // Grid and ticks.
  p.font(11);
  double step;
  for (double v : nice_ticks(x0v, x1v, 8, &step)) {
    p.color(0.88, 0.88, 0.88);
    p.line(X(v), T, X(v), T + ph, 1);
    p.color(0.2, 0.2, 0.2);
    p.text(X(v), T + ph + 8, fmt_tick(v, step), 0.5, 0);
  }
  std::vector<std::pair<double, std::string>> yt;  // transformed value, label
  if (c.log_y) {
    const int d0 = int(std::floor(y0v)), d1 = int(std::ceil(y1v));
    const bool few = d1 - d0 <= 2;
    for (int d = d0; d <= d1; ++d)
      for (double m : few ? std::vector<double>{1, 2, 5} : std::vector<double>{1}) {
        const double v = m * std::pow(10, d), l = std::log10(v);
        if (l >= y0v && l <= y1v) yt.push_back({l, fmt::format("{:g}", v)});
      }
    if (yt.size() < 3) {  // less than a 1-2-5 step from top to bottom: plain ticks in value space
      yt.clear();
      for (double v : nice_ticks(std::pow(10, y0v), std::pow(10, y1v), 6, &step))
        if (v > 0 && std::log10(v) >= y0v && std::log10(v) <= y1v) yt.push_back({std::log10(v), fmt_tick(v, step)});
    }
  } else {
    for (double v : nice_ticks(y0v, y1v, 7, &step)) yt.push_back({v, fmt_tick(v, step)});
  }
  for (const auto& [l, s] : yt) {
    const double yy = T + ph - (l - y0v) / (y1v - y0v) * ph;
    p.color(0.88, 0.88, 0.88);
    p.line(L, yy, L + pw, yy, 1);
    p.color(0.2, 0.2, 0.2);
    p.text(L - 8, yy, s, 1, 0.5);
  }
  if (c.y_zero_line && !c.log_y && y0v < 0 && y1v > 0) {
    p.color(0.45, 0.45, 0.45);
    p.line(L, Y(0), L + pw, Y(0), 1.2);
  }
  p.color(0.2, 0.2, 0.2);
  cairo_set_line_width(p.cr(), 1.2);
  cairo_rectangle(p.cr(), L, T, pw, ph);
  cairo_stroke(p.cr());

  // Series: error bars, lines, markers, point labels; clipped to the plot area.
  cairo_save(p.cr());
  cairo_rectangle(p.cr(), L, T, pw, ph);
  cairo_clip(p.cr());
  for (size_t si = 0; si < c.series.size(); ++si) {
    const Series& s = c.series[si];
    const Rgb col = kSeries[si % 10];
    std::vector<size_t> idx;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      if (std::isfinite(s.x[i]) && ok_y(s.y[i])) idx.push_back(i);
    std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return s.x[a] < s.x[b]; });
    p.color(col);
    for (size_t i : idx)
      if (i < s.y_err.size() && std::isfinite(s.y_err[i]) && s.y_err[i] > 0) {
        const double lo_e = ok_y(s.y[i] - s.y_err[i]) ? s.y[i] - s.y_err[i] : s.y[i];
        p.line(X(s.x[i]), Y(lo_e), X(s.x[i]), Y(s.y[i] + s.y_err[i]), 1.2);
      }
    if (idx.size() > 1 && !s.markers_only) {
      cairo_set_line_width(p.cr(), 2);
      cairo_move_to(p.cr(), X(s.x[idx[0]]), Y(s.y[idx[0]]));
      for (size_t k = 1; k < idx.size(); ++k) cairo_line_to(p.cr(), X(s.x[idx[k]]), Y(s.y[idx[k]]));
      cairo_stroke(p.cr());
    }
    for (size_t i : idx) {
      p.color(col);
      p.marker(int(si / 10 + si), X(s.x[i]), Y(s.y[i]), 5);
    }
    p.font(10);
    p.color(0.25, 0.25, 0.25);
    for (size_t i : idx)
      if (i < s.point_labels.size() && !s.point_labels[i].empty()) {
        const bool left = X(s.x[i]) + 7 + p.text_width(s.point_labels[i]) > L + pw;  // would be clipped
        p.text(X(s.x[i]) + (left ? -7 : 7), Y(s.y[i]) - 6, s.point_labels[i], left ? 1 : 0, 1);
      }
  }
  for (const auto& [xv, label] : c.x_lines) {
    if (!std::isfinite(xv)) continue;
    p.color(0.35, 0.35, 0.35);
    const double dash[] = {6, 4};
    cairo_set_dash(p.cr(), dash, 2, 0);
    p.line(X(xv), T, X(xv), T + ph, 1.4);
    cairo_set_dash(p.cr(), nullptr, 0, 0);
    p.font(11);
    const bool left = X(xv) + 4 + p.text_width(label) > L + pw;
    p.text(X(xv) + (left ? -4 : 4), T + 6, label, left ? 1 : 0, 0);
  }
  cairo_restore(p.cr());

  // Titles.
  p.color(0.1, 0.1, 0.1);
  p.font(16, true);
  const bool long_title = p.text_width(c.title) > pw;  // it then uses the legend's width too
  if (long_title) p.font(13, true);
  p.text(long_title ? width / 2.0 : L + pw / 2, 30, c.title, 0.5, 1);
  p.font(13);
  p.text(L + pw / 2, height - 22, c.x_label, 0.5, 1);
  p.text(24, T + ph / 2, c.y_label + (c.log_y ? " (log scale)" : ""), 0.5, 1, -M_PI / 2);

  // Legend, right of the plot.
  p.font(12);
  double ly = T + 10;
  for (size_t si = 0; si < c.series.size(); ++si) {
    const Rgb col = kSeries[si % 10];
    const double lx = L + pw + 20;
    p.color(col);
    if (!c.series[si].markers_only) p.line(lx, ly, lx + 26, ly, 2);
    p.marker(int(si / 10 + si), lx + 13, ly, 5);
    p.color(0.1, 0.1, 0.1);
    p.text(lx + 34, ly, c.series[si].name, 0, 0.5);
    ly += 22;
  }
  return img;
}

Result<Image> draw_category_heatmap(const CategoryHeatmap& h) {
  const size_t nr = h.y_labels.size(), nc = h.x_labels.size();
  if (nr == 0 || nc == 0) return Status::errorf("heatmap '{}': nothing to draw", h.title);
  if (h.cells.size() != nr || h.colors.size() != h.categories.size())
    return Status::errorf("heatmap '{}': inconsistent sizes", h.title);
  const double cw = std::clamp(900.0 / double(nc), 10.0, 48.0), ch = std::clamp(420.0 / double(nr), 14.0, 40.0);
  // Measure labels with a scratch surface.
  double ylab_w = 0, leg_w = 0, title_w = 0;
  {
    Image scratch(8, 8);
    Pen m(scratch);
    m.font(12);
    for (const auto& s : h.y_labels) ylab_w = std::max(ylab_w, m.text_width(s));
    for (const auto& s : h.categories) leg_w = std::max(leg_w, m.text_width(s));
    m.font(16, true);
    title_w = m.text_width(h.title);
  }
  const double L = 40 + ylab_w + 12, T = 56, B = 70;
  const double gw = cw * nc, gh = ch * nr;
  const double legend_x = L + gw + 30, legend_h = 30 + 22.0 * h.categories.size();
  const int width = int(std::max(legend_x + 30 + leg_w + 30, title_w + 40));
  const int height = int(std::max(T + gh + B, T + legend_h + 20));
  Image img(width, height);
  Pen p(img);
  for (size_t r = 0; r < nr; ++r) {
    if (h.cells[r].size() != nc) return Status::errorf("heatmap '{}': row {} has the wrong length", h.title, r);
    for (size_t c = 0; c < nc; ++c) {
      const int k = h.cells[r][c];
      if (k < 0 || size_t(k) >= h.categories.size()) {
        p.color(0.93, 0.93, 0.93);
      } else {
        p.color(h.colors[k]);
      }
      p.rect(L + c * cw, T + r * ch, cw, ch);
    }
  }
  // Cell borders.
  p.color(1, 1, 1);
  for (size_t c = 0; c <= nc; ++c) p.line(L + c * cw, T, L + c * cw, T + gh, 1);
  for (size_t r = 0; r <= nr; ++r) p.line(L, T + r * ch, L + gw, T + r * ch, 1);
  // Labels: every k-th column when cells are narrow.
  p.font(11);
  double colw = 0;
  for (const auto& s : h.x_labels) colw = std::max(colw, p.text_width(s));
  const size_t every = std::max<size_t>(1, size_t(std::ceil((colw + 4) / cw)));
  p.color(0.2, 0.2, 0.2);
  for (size_t c = 0; c < nc; c += every) p.text(L + (c + 0.5) * cw, T + gh + 8, h.x_labels[c], 0.5, 0);
  p.font(12);
  for (size_t r = 0; r < nr; ++r) p.text(L - 8, T + (r + 0.5) * ch, h.y_labels[r], 1, 0.5);
  p.color(0.1, 0.1, 0.1);
  p.font(16, true);
  p.text(L + gw / 2 < title_w / 2 + 10 ? title_w / 2 + 10 : L + gw / 2, 32, h.title, 0.5, 1);
  p.font(13);
  p.text(L + gw / 2, T + gh + 48, h.x_label, 0.5, 1);
  p.text(20, T + gh / 2, h.y_label, 0.5, 1, -M_PI / 2);
  // Legend: a swatch per category.
  p.font(12, true);
  p.text(legend_x, T + 4, "type", 0, 0.5);
  p.font(12);
  for (size_t k = 0; k < h.categories.size(); ++k) {
    const double y = T + 24 + 22.0 * k;
    p.color(h.colors[k]);
    p.rect(legend_x, y - 8, 22, 16);
    p.color(0.1, 0.1, 0.1);
    p.text(legend_x + 30, y, h.categories[k], 0, 0.5);
  }
  return img;
}

Result<Image> draw_matrix_heatmap(const MatrixHeatmap& h) {
  const size_t n = h.labels.size();
  if (n == 0) return Status::errorf("heatmap '{}': nothing to draw", h.title);
  if (h.m.size() != n) return Status::errorf("heatmap '{}': inconsistent sizes", h.title);
  const double cs = std::clamp(640.0 / double(n), 12.0, 64.0);
  double lab_w = 0, title_w = 0;
  {
    Image scratch(8, 8);
    Pen m(scratch);
    m.font(cs < 16 ? 10 : 12);
    for (const auto& s : h.labels) lab_w = std::max(lab_w, m.text_width(s));
    m.font(16, true);
    title_w = m.text_width(h.title);
  }
  const double L = 20 + lab_w + 10, T = 56, G = cs * n;
  const double cb_x = L + G + 30;
  const int width = int(std::max(cb_x + 20 + 70 + 30, title_w + 40));
  const int height = int(T + G + 10 + lab_w + 20);
  Image img(width, height);
  Pen p(img);
  const double span = h.vmax > h.vmin ? h.vmax - h.vmin : 1;
  auto tnorm = [&](double v) { return (v - h.vmin) / span; };
  const bool annotate = h.annotate && cs >= 40;
  p.font(cs >= 56 ? 12 : 10);
  for (size_t r = 0; r < n; ++r) {
    if (h.m[r].size() != n) return Status::errorf("heatmap '{}': row {} has the wrong length", h.title, r);
    for (size_t c = 0; c < n; ++c) {
      const double v = h.m[r][c];
      if (std::isfinite(v)) p.color(viridis(tnorm(v)));
      else p.color(0.93, 0.93, 0.93);
      p.rect(L + c * cs, T + r * cs, cs, cs);
      if (annotate && std::isfinite(v)) {
        if (tnorm(v) > 0.6) p.color(0.1, 0.1, 0.1);
        else p.color(1, 1, 1);
        p.text(L + (c + 0.5) * cs, T + (r + 0.5) * cs, fmt::format("{:.{}f}", v, h.decimals), 0.5, 0.5);
      }
    }
  }
  p.font(cs < 16 ? 10 : 12);
  p.color(0.2, 0.2, 0.2);
  for (size_t i = 0; i < n; ++i) {
    p.text(L - 6, T + (i + 0.5) * cs, h.labels[i], 1, 0.5);
    p.text(L + (i + 0.5) * cs, T + G + 6, h.labels[i], 1, 0.5, -M_PI / 2);
  }
  // Colour bar with 5 ticks.
  const int steps = 100;
  for (int i = 0; i < steps; ++i) {
    p.color(viridis(1.0 - double(i) / steps));
    p.rect(cb_x, T + G * i / steps, 20, G / steps + 1);
  }
  p.font(11);
  p.color(0.2, 0.2, 0.2);
  for (int i = 0; i <= 4; ++i) {
    const double v = h.vmin + span * i / 4, y = T + G - G * i / 4;
    p.line(cb_x + 20, y, cb_x + 25, y, 1);
    p.text(cb_x + 28, y, fmt::format("{:.{}f}", v, h.decimals), 0, 0.5);
  }
  p.color(0.1, 0.1, 0.1);
  p.font(16, true);
  p.text(std::max(L + G / 2, title_w / 2 + 10), 32, h.title, 0.5, 1);
  p.font(12);
  if (!h.colorbar_label.empty()) p.text(cb_x, T - 10, h.colorbar_label, 0, 1);
  return img;
}

}  // namespace gm::report
