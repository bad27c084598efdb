#Request parser and chunked decoder(src / http / request_parser.*, chunked_decoder.*).
lepus_add_test(http_parser_test SOURCES ${CMAKE_CURRENT_LIST_DIR} /
               request_parser_test.cc ${CMAKE_CURRENT_LIST_DIR} /
               request_parser_mutation_test.cc ${CMAKE_CURRENT_LIST_DIR} /
               chunked_decoder_test.cc LIBS lepus_http)
