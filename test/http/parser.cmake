# Request parser and chunked decoder (src/http/request_parser.*, chunked_decoder.*).
lepus_add_test(http_parser_test
  SOURCES request_parser_test.cc request_parser_mutation_test.cc chunked_decoder_test.cc
  LIBS lepus_http)
