// Consumer of an installed MetricNet: decodes a PGM from memory with data/,
// converts it to float with the Ink01 convention and checks the values (which
// links runtime/ through MetricNet::mn_data's dependencies); includes a header
// of autograd/ as well. Exit 0 = the installed headers, libraries and exported
// targets work together.
#include <cmath>
#include <iostream>
#include <string>

#include "autograd/variable.h"
#include "data/image_io.h"
#include "runtime/tensor.h"

int main() {
  try {
    const std::string pgm = std::string("P5 2 1 255\n") + char(0) + char(255);
    mn::data::GrayImage g = mn::data::decode_pgm(reinterpret_cast<const uint8_t*>(pgm.data()),
                                                 pgm.size(), "consumer.pgm");
    mn::Tensor u8 = mn::Tensor::from_host(g.pixels.data(), {g.height, g.width}, mn::DType::U8);
    mn::Tensor f = mn::data::to_float(u8, mn::data::FloatMode::Ink01, mn::DType::F64);
    std::vector<double> v = f.to_vector<double>();
    if (v.size() != 2 || v[0] != 1.0 || v[1] != 0.0) {
      std::cerr << "consumer: wrong pixels\n";
      return 1;
    }
    std::cout << "consumer: MetricNet installed and working (" << f.desc() << ")\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "consumer: " << e.what() << "\n";
    return 1;
  }
}
