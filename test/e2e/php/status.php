<?php
// A non-200 status and a custom header.
http_response_code(201);
header('X-Custom: yes');
echo "created\n";
