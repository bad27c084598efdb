<?php
// Issue 14: a 1xx from PHP (c=100, 101) must become a 502, never the final response.
http_response_code((int)$_GET['c']);
echo "body";
