<?php
// md5 and length of the request body.
header('Content-Type: application/json');
$body = file_get_contents('php://input');
echo json_encode(['md5' => md5($body), 'length' => strlen($body)]);
